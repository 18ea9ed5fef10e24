"""The config's schema (suite/config.py): every config the project ships passes it, and each mistake
is one line naming the key and the value. The command line's answers are in test_bad_input.py."""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf

import methods
from suite import board, record_store
from suite import config as schema
from suite.__main__ import group_choices
from suite.errors import ConfigError
from suite.modes import run_schemas

REPO = Path(__file__).resolve().parent.parent
CONF = REPO / "conf"


def choices(group: str) -> list[str]:
    """A group's shipped choices, as Hydra finds them (the method group's are made from the classes)."""
    return group_choices(group)


@cache
def _composed(overrides: tuple[str, ...], hydra: bool) -> dict:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("config", overrides=["data_dir=/nowhere", *overrides], return_hydra_config=hydra)
    if hydra:  # the preset's own sweep: {key: "a,b", ...}
        params = cfg.hydra.sweeper.params
        return OmegaConf.to_container(params, resolve=False) if params else {}
    return OmegaConf.to_container(cfg, resolve=True)


def composed(*overrides: str) -> dict:
    """The real config composed with ``overrides`` (budget smoke unless they say otherwise)."""
    budget = () if any(o.startswith(("budget=", "point=", "experiment=")) for o in overrides) else ("budget=smoke",)
    return copy.deepcopy(_composed((*budget, *overrides), False))


def refusal(config: dict) -> list[str]:
    """The lines of the schema's refusal, [] when it accepts ``config``."""
    try:
        schema.validate(config, run_schemas())
    except ConfigError as exc:
        return str(exc).splitlines()
    return []


# -- every shipped config passes ----------------------------------------------------------------------

def grid_budgets(mode: str) -> list[str] | None:
    """The budgets a mode has a grid for (None: every budget)."""
    grids = composed(f"mode={mode}")["mode"].get("grids")
    return None if grids is None else list(grids)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(method=st.sampled_from(choices("method")), task=st.sampled_from(choices("task")),
       budget=st.sampled_from(choices("budget")), model=st.sampled_from(choices("model")),
       mode=st.sampled_from(choices("mode")), protocol=st.sampled_from(choices("protocol")),
       logger=st.sampled_from(choices("logger")), point=st.sampled_from([None, *choices("point")]))
def test_the_schema_accepts_every_combination_of_shipped_choices(method, task, budget, model, mode, protocol,
                                                                 logger, point):
    overrides = [f"method={method}", f"task={task}", f"budget={budget}", f"model={model}", f"mode={mode}",
                 f"protocol={protocol}", f"logger={logger}", *([f"point={point}"] if point else [])]
    config = composed(*overrides)
    budgets = grid_budgets(mode)
    assume(budgets is None or config["budget"]["name"] in budgets)  # kernel, decode: no cpu grid
    assert refusal(config) == []


@pytest.mark.parametrize("experiment", choices("experiment"))
def test_every_experiment_preset_passes_with_each_value_its_sweep_takes(experiment):
    swept = {key: str(values).split(",") for key, values in _composed((f"experiment={experiment}",), True).items()}
    # Every value of every swept key at least once (the whole product of the board is 20 compositions).
    jobs = [{key: values[i % len(values)] for key, values in swept.items()}
            for i in range(max(map(len, swept.values()), default=1))]
    for job in jobs:
        config = composed(f"experiment={experiment}", *(f"{k}={v}" for k, v in job.items()))
        assert refusal(config) == [], job


def gpu_jobs() -> list[tuple[str, ...]]:
    """The overrides of every job the GPU board runs (suite/boards/gpu.yaml: each LRA preset with each
    method; seeds change no model) and of the paper budget with each of those methods."""
    gpu = board.load("gpu")
    names = board.roster(gpu, methods.available())
    jobs = [(f"{gpu.point_group}={p}", f"method={m}") for p in gpu.points for m in names]
    return jobs + [("budget=paper", f"method={m}") for m in names]


@pytest.mark.parametrize("job", gpu_jobs(), ids="+".join)
def test_every_gpu_job_composes_validates_and_builds_its_model_on_the_cpu(job):
    """What a GPU run would build, at the preset's sizes, built here and run forward on a
    short input by the CPU path. Its parameters are zeros rather than drawn (a paper model has 19M):
    what is checked is that it builds and runs. The vocabulary and the classes stand in for
    the task's (they size only the embedding and the head, and the data behind them may need a
    download). The Triton path's launches at these shapes are compiled by tests/test_triton_compile.py."""
    import torch

    from suite.model import build_model
    from tasks.base import TaskInfo

    config = composed(*job)
    assert refusal(config) == [], job
    task = config["task"]
    info = TaskInfo(task["name"], task["family"], task["seq_len"], vocab_size=257, num_classes=10,
                    extra={"pair": task["name"] == "retrieval"})
    with torch.device("meta"):
        model = build_model(task["backbone"], info, config["model"], config["method"])
    model = model.to_empty(device="cpu")
    with torch.no_grad():
        for tensor in model.state_dict().values():
            tensor.zero_()
    width, heads = config["model"]["d_model"], config["model"]["num_heads"]
    attention = [m for m in model.modules() if hasattr(m, "head_dim") and hasattr(m, "impls")]
    assert len(attention) == config["model"]["num_layers"]
    assert {m.head_dim for m in attention} == {width // heads}
    ids = torch.ones(2, 64, dtype=torch.long)
    with torch.no_grad():
        logits, _ = model.eval()({"input_ids": ids, "input_ids_2": ids, "label": None})
    assert logits.shape == (2, 10) and torch.isfinite(logits).all()


def state_sizes() -> list[tuple[str, ...]]:
    """Each smaller state a board runs (its state axes), at its state point."""
    found = []
    for name in board.names():
        spec = board.load(name)
        for method, (key, values) in spec.state_axes.items():
            found += [(f"{spec.point_group}={spec.state_point}", f"method={method}", f"{key}={board.hydra_value(v)}")
                      for v in values]
    return found


@pytest.mark.parametrize("job", [*((f"point={p}",) for p in choices("point")), *state_sizes()], ids="+".join)
def test_every_board_point_and_state_size_passes(job):
    assert refusal(composed(*job, "protocol=lr_sweep")) == []


def test_every_record_under_results_passes(tmp_path):
    """Records written before a key existed lack it: the schema lets such keys be absent."""
    checked = 0
    for path, record in record_store.iter_records(REPO / "results"):
        assert refusal(record["config"]) == [], path
        checked += 1
    assert checked > 0


# -- mistakes, one line each ----------------------------------------------------------------------------

def test_each_mistake_is_its_own_line_naming_key_and_value():
    config = composed()
    config["budget"].update(max_steps=0, lr="fast")
    config["model"]["dropout"] = True
    config["seed"] = "one"
    assert sorted(refusal(config)) == [
        "budget.lr must be a finite number > 0, got 'fast'",
        "budget.max_steps must be a positive integer, got 0",
        "model.dropout must be a number in [0, 1), got True",
        "seed must be an integer, got 'one'",
    ]


@pytest.mark.parametrize("where, key, says", [
    (("budget",), "max_step", "unknown config key 'budget.max_step'; did you mean 'budget.max_steps'?"),
    (("model",), "widht", "unknown config key 'model.widht'; valid keys of model: name, d_model, "),
    (("method",), "option", "unknown config key 'method.option'; did you mean 'method.options'?"),
])
def test_a_key_the_harness_does_not_read_is_named_with_the_key_meant(where, key, says):
    config = composed()
    block = config
    for part in where:
        block = block[part]
    block[key] = 1
    [line] = refusal(config)
    assert line.startswith(says), line


def test_keys_of_a_task_and_of_a_method_are_theirs_to_check():
    config = composed("method=favor", "task=mqar")
    config["task"]["anything"] = 1  # the task's loader checks its own options
    config["method"]["options"]["num_features"] = "many"  # the method checks its options when built
    assert refusal(config) == []


def test_a_key_added_since_a_record_was_written_may_be_absent_but_not_wrong():
    config = composed()
    for key in ("memory_cap_bytes", "cpu_threads", "resume", "protocol"):
        del config[key]
    del config["budget"]["checkpoint_every"], config["model"]["mixers"]
    assert refusal(config) == []
    del config["budget"]["max_steps"]
    assert refusal(config) == ["missing config key 'budget.max_steps'"]


@pytest.mark.parametrize("mode, change, says", [
    ("kernel", {"dtypes": ["float8"]}, "mode.grids.smoke.dtypes must be a non-empty list from float32, bfloat16, "
                                       "float16, got ['float8']"),
    ("kernel", {"causal": [1]}, "mode.grids.smoke.causal must list true and/or false, got [1]"),
    ("kernel", {"lenghts": [64]}, "unknown config key 'mode.grids.smoke.lenghts'; did you mean "
                                  "'mode.grids.smoke.lengths'?"),
    ("kernel", {"max_length": {"fast": 8}}, "mode.grids.smoke.max_length must map implementations (naive, chunk, "
                                            "triton, sdpa) to positive lengths, got {'fast': 8}"),
    ("decode", {"timed_steps": 0}, "mode.grids.smoke.timed_steps must be a positive integer, got 0"),
    ("decode", {"dtype": "int8"}, "mode.grids.smoke.dtype must be one of float32, bfloat16, float16, got 'int8'"),
    ("fidelity", {"score_stds": [], "captured": False},
     "mode.grids.smoke: no input source: score_stds is empty and captured is false"),
    ("fidelity", {"capture": {"budget": {"max_steps": 0}}},
     "mode.grids.smoke.capture.budget.max_steps must be a positive integer, got 0"),
    ("fidelity", {"capture": {"model": {}}},
     "unknown config key 'mode.grids.smoke.capture.model'; valid keys of mode.grids.smoke.capture: task, budget"),
])
def test_a_bad_grid_is_one_line_naming_its_key(mode, change, says):
    config = composed(f"mode={mode}")
    config["mode"]["grids"]["smoke"].update(change)
    assert refusal(config) == [says]


def test_a_budget_without_a_grid_names_the_grids_there_are():
    config = composed("mode=kernel", "budget.name=huge")
    assert refusal(config) == ["mode=kernel has no grid for budget 'huge'; valid budgets: smoke, small, paper"]


def test_lr_sweep_needs_its_lists():
    config = composed("protocol=lr_sweep")
    del config["protocol"]["seeds"]
    assert refusal(config) == ["protocol=lr_sweep needs protocol.lrs and protocol.seeds"]


def test_an_unknown_choice_inside_the_config_gets_the_hint_too():
    config = composed()
    config["protocol"]["name"] = "lr_swep"
    config["device"] = "gpu"  # no hint among three short names: 'gpu' would suggest 'cpu'
    assert sorted(refusal(config)) == [
        "unknown device 'gpu'; valid: auto, cpu, cuda",
        "unknown protocol 'lr_swep'; did you mean 'lr_sweep'? valid protocols: single, lr_sweep",
    ]
