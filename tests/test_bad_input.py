"""Bad input at the command line and in data files: one line naming the bad value (and the valid
choices or the key meant), exit code 2, no traceback, nothing written. Property-based tests check
that the validators refuse every bad record or config with their own error, never another one.

The entry point runs in this process (its ``main()`` with ``sys.argv`` set), so each case costs
the check itself rather than a Python start; one case runs as a real subprocess to prove the same.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hydra.core.global_hydra import GlobalHydra
from hypothesis import given, settings
from hypothesis import strategies as st

import methods
from methods.base import MethodError
from suite import record_store, records
from suite.__main__ import main
from suite.config import added_key, validate
from suite.errors import ConfigError
from suite.modes import run_schemas
from suite.schema import SCHEMA
from tests.test_config import composed

REPO = Path(__file__).resolve().parent.parent
FAST = ("task=mqar", "task.vocab_size=128")


@pytest.fixture
def cli(monkeypatch, capsys, tmp_path, data_dir):
    """``python -m suite *args`` in this process; returns (exit code, stderr) once it exits."""
    monkeypatch.setenv("SUITE_HYDRA_DIR", str(tmp_path / "hydra"))
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)

    def call(*args: str, data: Path = data_dir) -> tuple[int, str]:
        flags = [a for a in args if a.startswith("-")]  # Hydra's flags come before the overrides
        argv = ["suite", *flags, "budget=smoke", f"data_dir={data}", f"results_dir={tmp_path / 'results'}",
                *(a for a in args if not a.startswith("-"))]
        monkeypatch.setattr(sys, "argv", argv)
        GlobalHydra.instance().clear()
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_info:
            main()
        return exit_info.value.code, capsys.readouterr().err

    return call


def assert_one_line_refusal(code: int, err: str, says: str, results: Path) -> None:
    assert code == 2, err
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith("error: ") and says in err, err
    assert not results.exists() or not [p for p in results.rglob("*") if p.is_file()]


BAD_INPUT = [
    # unknown choices the CLI tests do not try (tests/test_cli.py: method, task, budget, mode)
    (("model=huge",), "unknown model 'huge'; valid models: hybrid, paper, shortconv, small, smoke"),
    (("logger=tensorboard",), "unknown logger 'tensorboard'; valid loggers: none, wandb"),
    (("recipe=zoo",), "unknown recipe 'zoo'; did you mean 'zoology'? valid recipes: suite, zoology"),
    (("recipe.name=nope",), "error: unknown recipe 'nope'; valid recipes: suite, zoology"),
    (("recipe=zoology", "recipe.init=jax"), "recipe.init must be one of pytorch, zoology, got 'jax'"),
    (("recipe.conv_skip=maybe",), "recipe.conv_skip must be true or false, got 'maybe'"),
    (("recipe.embed_dropout=1.5",), "recipe.embed_dropout must be a number in [0, 1) or null (model.dropout), got 1.5"),
    (("recipe.shedule=epoch",), "did you mean 'recipe.schedule'?"),
    (("experiment=lra_nope",), "unknown experiment 'lra_nope'; did you mean 'lra_listops'? valid experiments: "
                               "lra_image, "),
    # a choice close to a valid one gets the hint misspelled keys get, in a sweep's list too
    (("method=favour",), "unknown method 'favour'; did you mean 'favor'? valid methods: " + ", ".join(
        sorted(methods.available()))),
    (("-m", "method=softmax,favour"), "unknown method 'favour'; did you mean 'favor'? valid methods: favor, "),
    (("task=mqr",), "unknown task 'mqr'; did you mean 'mqar'? valid tasks: genomic_benchmarks, "),
    (("point=cpu_mqar_6x4",), "unknown point 'cpu_mqar_6x4'; did you mean 'cpu_mqar_64x4'? valid points: "),
    (("+tuning=mqar_smal",), "unknown tuning 'mqar_smal'; did you mean 'mqar_small'? valid tunings: "),
    (("method=linear", "method.impl=cuda"),
     "unknown impl 'cuda' for method 'linear'; valid: auto, naive, chunk, triton"),
    (("device=gpu",), "unknown device 'gpu'; valid: auto, cpu, cuda"),
    # misspelled keys: the key meant, not Hydra's five lines advising `+key=`
    (("budgte.max_steps=3",), "unknown config key 'budgte.max_steps'; did you mean 'budget.max_steps'?"),
    (("budget.max_step=3",), "unknown config key 'budget.max_step'; did you mean 'budget.max_steps'?"),
    (("sead=1",), "unknown config key 'sead'; did you mean 'seed'?"),
    (("+budget.max_step=3",), "unknown config key 'budget.max_step'; did you mean 'budget.max_steps'?"),
    # a key added with + that no schema declares: it ran in silence, its typo stored in the record
    (("+budgte.max_steps=3",), "unknown config key 'budgte.max_steps'; did you mean 'budget.max_steps'?"),
    (("+sed=3",), "unknown config key 'sed'; did you mean 'seed'?"),
    (("+task.seq_length=50",), "unknown config key 'task.seq_length'; did you mean 'task.seq_len'?"),
    (("+methd.impl=naive",), "unknown config key 'methd.impl'; did you mean 'method.impl'?"),
    (("+note=${oc.env:SECRET_TOKEN}",), "note=${oc.env:SECRET_TOKEN} reads an environment variable into the config"),
    (("task.name=mqar-${oc.env:HOME}",), "reads an environment variable into the config"),
    (("task.vocab=64",), "unknown config key 'task.vocab'; did you mean 'task.vocab_size'?"),
    (("task=listops", "task.vocab_size=64"), "unknown config key 'task.vocab_size'; valid keys of task: name, "),
    (("method=favor", "method.options.num_feature=8"), "did you mean 'method.options.num_features'?"),
    (("-m", "method=softmax,favor", "method.options.num_features=8"),
     "unknown config key 'method.options.num_features'; valid keys of method.options: none (with method=softmax)"),
    # zero, negative and wrongly typed values
    (("budget.batch_size=0",), "budget.batch_size must be a positive integer, got 0"),
    (("budget.max_steps=true",), "budget.max_steps must be a positive integer, got True"),
    (("budget.num_val=-4",), "budget.num_val must be a positive integer or null, got -4"),
    (("budget.lr=0",), "budget.lr must be a finite number > 0, got 0"),
    (("budget.lr=nan",), "budget.lr must be a finite number > 0, got nan"),
    (("budget.warmup_steps=-1",), "budget.warmup_steps must be an integer >= 0, got -1"),
    (("budget.weight_decay=-0.1",), "budget.weight_decay must be a finite number >= 0, got -0.1"),
    (("budget.grad_clip=0",), "budget.grad_clip must be a finite number > 0 or null, got 0"),
    (("budget.checkpoint_every=0",), "budget.checkpoint_every must be a positive integer or null, got 0"),
    (("model.num_layers=0",), "model.num_layers must be a positive integer, got 0"),
    (("model.d_ff=-64",), "model.d_ff must be a positive integer, got -64"),
    (("model.dropout=1.5",), "model.dropout must be a number in [0, 1), got 1.5"),
    (("model.dropout=high",), "model.dropout must be a number in [0, 1), got 'high'"),
    (("memory_cap_bytes=0",), "memory_cap_bytes must be a positive integer (bytes) or null, got 0"),
    (("cpu_threads=0",), "cpu_threads must be a positive integer or null, got 0"),
    (("budget.lr=1e-3x",), "budget.lr must be a finite number > 0, got '1e-3x'"),
    (("budget.target_val_accuracy=1.5",), "budget.target_val_accuracy must be a number in (0, 1] or null, got 1.5"),
    (("protocol=lr_sweep", "protocol.seeds=[0,0]"), "protocol.seeds must be a non-empty list of distinct integers"),
    (("mode=kernel", "mode.grids.smoke.lengths=[64,0]"),
     "mode.grids.smoke.lengths must be a non-empty list of positive integers, got [64, 0]"),
    (("mode=decode", "budget.name=huge"),
     "mode=decode has no grid for budget 'huge'; valid budgets: smoke, small, paper"),
    (("budget.max_steps=x",), "budget.max_steps must be a positive integer, got 'x'"),
    (("budget.max_steps=[1",), "cannot parse the override 'budget.max_steps=[1'"),
    (("seed=abc",), "seed must be an integer, got 'abc'"),
    (("seed=1.5",), "seed must be an integer, got 1.5"),
    (("seed=99999999999999999999999",), "seed must be in [0, 4294967295], got 99999999999999999999999"),
    (("seed=-1",), "seed must be in [0, 4294967295], got -1"),
    (("cpu_threads=100000",), "cpu_threads must be in [1, 1024], got 100000"),  # torch crashed on it
    (("force=maybe",), "force must be true or false, got 'maybe'"),
    (("resume=maybe",), "resume must be true or false, got 'maybe'"),
    (("results_dir=",), "results_dir must name a folder (default: results), got ''"),
    (("task.vocab_size=nope",), "task.vocab_size='nope': expected an integer >= 4"),
    # lengths the task's data cannot have
    (("task=listops", "task.seq_len=4096"), "task.seq_len=4096: ListOps expressions are shorter than 2000 tokens"),
    (("task.seq_len=8",), "task.num_kv_pairs=4: at most seq_len / 4 = 2 pairs fit in seq_len=8"),
    (("task.seq_len=63",), "task.seq_len=63: MQAR needs an even length"),
    (("task=image", "task.seq_len=2048"), "task.seq_len=2048: a 32x32 image is 1024 tokens"),
]


@pytest.mark.parametrize("args, says", BAD_INPUT, ids=[" ".join(a) for a, _ in BAD_INPUT])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(cli, tmp_path, args, says):
    code, err = cli(*(() if any(a.startswith("task=") for a in args) else FAST), *args)
    assert_one_line_refusal(code, err, says, tmp_path / "results")


def test_an_unknown_method_is_refused_by_the_library_with_the_valid_ones():
    # The one place an unknown method is tested: here, by name at the command line (BAD_INPUT), and
    # as a library user calls methods.build.
    with pytest.raises(MethodError, match=f"^unknown method 'nope'; valid methods: {', '.join(methods.available())}$"):
        methods.build("nope", head_dim=8)


def test_cuda_without_cuda_is_one_line_at_the_cli(cli, tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")  # the refusal only exists where CUDA is absent
    code, err = cli(*FAST, "device=cuda")
    assert_one_line_refusal(code, err, "device=cuda but no CUDA device is available here; use device=cpu or "
                            "device=auto", tmp_path / "results")


def test_an_added_key_a_schema_declares_or_a_method_checks_is_admitted(cli, tmp_path):
    # Keys a config may lack (a budget without checkpoint_every, a model without qkv_conv) are no typos;
    # a method's options are the method's to check, and it says so.
    modes = run_schemas().values()
    assert added_key("budget.checkpoint_every", modes) is None and added_key("model.qkv_conv", modes) is None
    assert added_key("method.options.anything", modes) is None and added_key("mode.grids.smoke.seq_lens", modes) is None
    code, err = cli(*FAST, "+method.options.num_features=8")
    assert_one_line_refusal(code, err, "softmax: unknown option(s) num_features; valid options: none",
                            tmp_path / "results")


@pytest.mark.parametrize("where", ["data_dir", "SUITE_HYDRA_DIR"])
def test_a_folder_that_is_a_file_is_one_line(cli, tmp_path, monkeypatch, where):
    blocking = tmp_path / "a_file"
    blocking.write_text("keep me")
    if where == "data_dir":
        code, err = cli(*FAST, data=blocking)
        says = f"data_dir={str(blocking)!r} is a file; name a folder"
    else:
        monkeypatch.setenv("SUITE_HYDRA_DIR", str(blocking / "logs"))
        code, err = cli(*FAST)
        says = (f"SUITE_HYDRA_DIR={str(blocking / 'logs')!r} is not a folder ({blocking} is a file); "
                "name a folder for Hydra's logs")
    assert_one_line_refusal(code, err, says, tmp_path / "results")
    assert blocking.read_text() == "keep me" and not (tmp_path / "results").exists()


def test_a_refused_command_leaves_no_results_folder(cli, tmp_path):
    # refused by the task after the results folder was checked writable: the folder goes again
    code, err = cli(*FAST, "task.seq_len=63")
    assert_one_line_refusal(code, err, "task.seq_len=63: MQAR needs an even length", tmp_path / "results")
    assert not (tmp_path / "results").exists()


def test_a_misspelled_key_is_one_line_from_a_real_process(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    done = subprocess.run([sys.executable, "-m", "suite", "budget.max_step=3"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == "error: unknown config key 'budget.max_step'; did you mean 'budget.max_steps'?\n"


# -- malformed data files ---------------------------------------------------------------------------

GOOD_ROW = "( ( ( [MAX 1 ) 2 ) ] )\t2"
BROKEN_TSV = {
    "wrong header": (b"Src\tTgt\n" + GOOD_ROW.encode() + b"\n", "basic_train.tsv:1: header ['Src', 'Tgt']"),
    "a field too many": (f"Source\tTarget\n{GOOD_ROW}\textra\n".encode(),
                         "basic_train.tsv:2: 3 tab-separated fields, expected 2"),
    "unknown token": (b"Source\tTarget\n( ( [FOO 1 ) ] )\t1\n", "basic_train.tsv:2: unknown ListOps token '[FOO'"),
    "target not a digit": (b"Source\tTarget\n( ( ( [MAX 1 ) 2 ) ] )\tten\n",
                           "basic_train.tsv:2: Target 'ten' is not a digit 0-9"),
    "not text": (b"Source\tTarget\n\xff\xfe\x00\x81\tx\n", "unreadable TSV ('utf-8' codec can't decode byte 0xff"),
    "empty file": (b"", "basic_train.tsv: empty file, expected the header"),
}


@pytest.mark.parametrize("case", BROKEN_TSV)
def test_a_broken_local_data_file_is_one_line_naming_file_and_line(cli, tmp_path, case):
    content, says = BROKEN_TSV[case]
    data = tmp_path / "data"
    release = data / "lra_release" / "listops-1000"
    release.mkdir(parents=True)
    for split in ("train", "val", "test"):
        (release / f"basic_{split}.tsv").write_text(f"Source\tTarget\n{GOOD_ROW}\n")
    (release / "basic_train.tsv").write_bytes(content)
    code, err = cli("task=listops", "task.source=local", data=data)
    assert_one_line_refusal(code, err, says, tmp_path / "results")
    assert not (data / "listops").exists() or not any((data / "listops").iterdir())  # no partial cache


def test_missing_local_data_says_where_to_put_it(cli, tmp_path):
    code, err = cli("task=listops", "task.source=local", data=tmp_path / "nothing_here")
    assert_one_line_refusal(code, err, "task.source=local: missing ", tmp_path / "results")
    assert "lra_release.gz" in err and "or set task.source=generate" in err


# -- property-based: the record reader --------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


def a_record() -> dict:
    config = {"method": {"name": "softmax"}, "task": {"name": "listops"}, "seed": 0}
    return record_store.new_record("train", config=config, config_hash=records.config_hash(config, "cpu"),
                              method={"name": "softmax", "impl": "auto", "params": {}},
                              task={"name": "listops"}, metrics={"test_accuracy": 0.5}, env={"device": "cpu"})


def wrong_type(field: str, value: object) -> bool:
    """Whether ``value`` breaks ``field``'s declared type (``true`` is no schema number)."""
    if field == "schema":
        return type(value) is not int or value != SCHEMA
    return not isinstance(value, records.FIELD_TYPES[field])


@settings(max_examples=150, deadline=None)
@given(field=st.sampled_from(records.FIELDS), drop=st.booleans(), data=st.data())
def test_a_record_missing_a_field_or_of_a_wrong_type_is_refused_naming_the_file(tmp_path_factory, field, drop, data):
    record = a_record()
    if drop:
        del record[field]
    else:
        record[field] = data.draw(json_values.filter(lambda v: wrong_type(field, v)), label="wrong value")
    path = tmp_path_factory.mktemp("records") / "bad.json"
    path.write_text(json.dumps(record))
    with pytest.raises(records.RecordError) as refused:
        record_store.read_record(path)
    assert str(path) in str(refused.value) and field in str(refused.value)


def test_the_reader_accepts_what_the_writer_writes(tmp_path):
    record = a_record()
    assert record_store.read_record(record_store.write_record(record, tmp_path)) == record


# -- property-based: config validation --------------------------------------------------------------

any_value = (st.integers(min_value=-3, max_value=10**6) | st.booleans() | st.text(max_size=4)
             | st.floats(allow_nan=True, allow_infinity=True) | st.none())
MODEL = {"d_model": 32, "num_layers": 1, "num_heads": 2, "d_ff": 64, "dropout": 0.0}
BUDGET = {"name": "smoke", "max_steps": 8, "batch_size": 4, "lr": 1e-3, "weight_decay": 0.01, "warmup_steps": 2,
          "grad_clip": 1.0, "eval_every": 4, "eval_batches": 2, "num_train": 32, "num_val": 16, "num_test": 16,
          "checkpoint_every": None}


def is_count(value: object, zero: bool = False) -> bool:
    return type(value) is int and (value >= 0 if zero else value > 0)


def is_real(value: object) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


def invalid_model_keys(model: dict, seq_len: object) -> set[str]:
    bad = {f"model.{k}" for k in ("d_model", "num_layers", "num_heads", "d_ff") if not is_count(model[k])}
    if not bad and model["d_model"] % model["num_heads"]:
        bad.add("model.num_heads")
    if not (is_real(model["dropout"]) and 0 <= model["dropout"] < 1):
        bad.add("model.dropout")
    if not is_count(seq_len):
        bad.add("task.seq_len")
    return bad


def invalid_budget_keys(budget: dict) -> set[str]:
    rules = {
        "max_steps": is_count, "batch_size": is_count, "eval_every": is_count,
        "eval_batches": lambda v: v is None or is_count(v), "num_train": lambda v: v is None or is_count(v),
        "num_val": lambda v: v is None or is_count(v), "num_test": lambda v: v is None or is_count(v),
        "checkpoint_every": lambda v: v is None or is_count(v),
        "warmup_steps": lambda v: is_count(v, zero=True), "lr": lambda v: is_real(v) and v > 0,
        "weight_decay": lambda v: is_real(v) and v >= 0, "grad_clip": lambda v: v is None or (is_real(v) and v > 0),
    }
    return {f"budget.{k}" for k, valid in rules.items() if not valid(budget[k])}


def refusal(config: dict) -> set[str] | None:
    """The lines of the schema's refusal of ``config``, or None when it accepts it."""
    try:
        validate(config, run_schemas())
    except ConfigError as exc:
        return set(str(exc).splitlines())
    return None


@settings(max_examples=300, deadline=None)
@given(changes=st.dictionaries(st.sampled_from([*MODEL, "seq_len"]), any_value, max_size=3))
def test_model_config_is_accepted_or_refused_naming_the_key(changes):
    model = {**MODEL, **{k: v for k, v in changes.items() if k != "seq_len"}}
    seq_len = changes.get("seq_len", 64)
    bad = invalid_model_keys(model, seq_len)
    config = composed("task=mqar")
    config["model"], config["task"]["seq_len"] = model, seq_len
    lines = refusal(config)
    if bad:  # one line per mistake, each naming its key
        assert lines and all(any(key in line for key in bad) for line in lines), (lines, bad)
    else:
        assert lines is None


@settings(max_examples=300, deadline=None)
@given(changes=st.dictionaries(st.sampled_from([k for k in BUDGET if k != "name"]), any_value, max_size=3))
def test_budget_is_accepted_or_refused_naming_the_key(changes):
    budget = {**BUDGET, **changes}
    bad = invalid_budget_keys(budget)
    config = composed("task=mqar")
    config["budget"] = budget
    lines = refusal(config)
    if bad:
        assert lines and all(any(key in line for key in bad) for line in lines), (lines, bad)
        assert all(any(key in line for line in lines) for key in bad)  # every key-wise mistake is said
    else:
        assert lines is None
