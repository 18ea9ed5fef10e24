"""The record writer and reader: one schema per kind (suite/schema.py) that both check, atomic
writes, stable hashes, no secrets; every record published under results/ validates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from suite import modes, record_store, records, schema
from tests.test_site import decode_record, fidelity_record, kernel_record

REPO = Path(__file__).resolve().parent.parent

CONFIG = {"method": {"name": "softmax"}, "task": {"name": "listops"}, "seed": 0,
          "results_dir": "results", "data_dir": "/data"}


def make(**overrides) -> dict:
    fields = dict(config=CONFIG, config_hash=records.config_hash(CONFIG, "cpu"),
                  method={"name": "softmax", "impl": "auto", "params": {}},
                  task={"name": "listops", "seq_len": 2000}, metrics={"test_accuracy": 0.5},
                  env={"device": "cpu"})
    fields.update(overrides)
    return record_store.new_record("train", **fields)


def test_record_has_every_design_field_and_reads_back(tmp_path):
    path = record_store.write_record(make(), tmp_path)
    assert path.parent == tmp_path / "train" / "listops" / "softmax"
    back = record_store.read_record(path)
    assert tuple(back) == records.FIELDS
    assert back["schema"] == schema.SCHEMA and back["status"] == "ok"
    assert back["created"].endswith("Z")
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left


def test_config_hash_ignores_paths_but_not_what_defines_the_run():
    base = records.config_hash(CONFIG, "cpu")
    assert records.config_hash({**CONFIG, "results_dir": "elsewhere", "data_dir": "/x"}, "cpu") == base
    assert records.config_hash({**CONFIG, "seed": 1}, "cpu") != base
    assert records.config_hash(CONFIG, "cuda") != base


def test_home_directory_is_scrubbed_from_the_config(tmp_path):
    home = str(Path.home())
    record = make(config={**CONFIG, "data_dir": f"{home}/datasets"})
    assert home not in json.dumps(record) or home in ("/", "")
    assert record["config"]["data_dir"] == "~/datasets"


@pytest.mark.parametrize("text, problem", [
    ("{not json", "not a readable JSON record"),
    ("[1, 2]", "not a record"),
    (json.dumps({"schema": 99}), "unknown schema"),
    (json.dumps({"schema": schema.SCHEMA, "kind": "train"}), "missing fields"),
])
def test_bad_files_are_refused_with_their_name(tmp_path, text, problem):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(records.RecordError, match=problem) as info:
        record_store.read_record(path)
    assert str(path) in str(info.value)


def test_iter_records_skips_bad_files_with_a_warning(tmp_path):
    good = record_store.write_record(make(), tmp_path)
    (tmp_path / "train" / "corrupt.json").write_text("{")
    with pytest.warns(UserWarning, match="corrupt.json"):
        found = list(record_store.iter_records(tmp_path))
    assert [p for p, _ in found] == [good]


def test_a_failed_write_leaves_nothing_behind(tmp_path):
    record = make(metrics={"x": float("nan")})  # NaN is not JSON: the write must fail whole
    with pytest.raises(ValueError):
        record_store.write_record(record, tmp_path)
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


def test_unwritable_results_dir_is_refused_before_work(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ValueError, match="not writable"):
        records.check_writable(blocker / "results")  # a path under a regular file


json_values = st.recursive(  # integers a reader can take (64 bits: test_a_number_beyond_64_bits_is_refused)
    st.none() | st.booleans() | st.integers(-schema.INT_LIMIT, schema.INT_LIMIT)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(), lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=50, deadline=None)
@given(metrics=st.dictionaries(
    st.text(min_size=1).filter(lambda k: k not in modes.metrics_model("train").model_fields), json_values, max_size=6))
def test_any_json_metrics_round_trip(tmp_path_factory, metrics):
    root = tmp_path_factory.mktemp("r")
    record = make(metrics={**metrics, "test_accuracy": 0.5})  # an ok train record holds its accuracy
    written = record_store.write_record(record, root)
    assert record_store.read_record(written)["metrics"] == {**json.loads(json.dumps(metrics)), "test_accuracy": 0.5}


@pytest.mark.parametrize("value", [schema.INT_LIMIT + 1, -schema.INT_LIMIT - 1, 10**400])
def test_a_number_beyond_64_bits_is_refused(tmp_path, value):
    with pytest.raises(records.RecordError, match=r"field 'metrics.extra.0': an integer of \d+ digits is beyond 64"):
        record_store.write_record(make(metrics={"extra": [value]}), tmp_path)
    assert not list(tmp_path.rglob("*.json"))


def test_every_declared_metric_is_in_its_kinds_schema():
    for mode in modes.registry().values():
        published = json.dumps(schema.json_schema(mode.kind, modes.metrics_model(mode.kind)))
        for metric in mode.all_metrics():
            assert f'"{metric.name}"' in published and schema.described(metric) in published, (mode.kind, metric.name)


@pytest.mark.parametrize("kind, change, where", [
    ("train", lambda r: r["metrics"].update(test_accuracy="high"), "metrics.test_accuracy"),
    ("train", lambda r: r["metrics"].update(peak_memory_bytes=1.5), "metrics.peak_memory_bytes"),  # bytes are whole
    ("train", lambda r: r["task"].update(seq_len=True), "task.seq_len"),  # true is no length
    ("train", lambda r: r["env"].update(git_dirty="no"), "env.git_dirty"),
    ("train", lambda r: r.update(metric={}), "metric"),  # a misspelt field
    ("kernel", lambda r: r["metrics"]["points"][0].pop("length"), "metrics.points.0.length"),
    ("kernel", lambda r: r["metrics"]["points"][1].update(status="fine"), "metrics.points.1.status"),
    ("decode", lambda r: r["metrics"]["reference"]["points"][0].update(state_bytes=-8),
     "metrics.reference.points.0.state_bytes"),
    ("fidelity", lambda r: r["metrics"]["points"][0]["denominator_rel_error"].update(mean="small"),
     "metrics.points.0.denominator_rel_error.mean"),
])
def test_the_writer_and_the_reader_refuse_what_the_schema_refuses(tmp_path, kind, change, where):
    made = {"train": make, "kernel": lambda: kernel_record("linear", {"chunk": lambda n: 1e-6 * n}),
            "decode": lambda: decode_record("linear"), "fidelity": lambda: fidelity_record("favor")}
    good = made[kind]()
    path = record_store.write_record(good, tmp_path / "good")
    bad = json.loads(path.read_text())
    change(bad)
    with pytest.raises(records.RecordError, match=f"field '{where}'"):
        record_store.write_record(bad, tmp_path / "bad")
    assert not (tmp_path / "bad").exists()  # nothing written
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(records.RecordError, match=f"field '{where}'") as refused:
        record_store.read_record(tmp_path / "bad.json")
    assert str(tmp_path / "bad.json") in str(refused.value)


def test_keys_the_schema_does_not_name_are_kept_as_written(tmp_path):
    record = make(metrics={"test_accuracy": 0.5, "steps": 3, "my_own_metric": {"any": ["json", 1]}})
    record["method"]["note"] = "kept"
    path, back, model = record_store.write_record(record, tmp_path), None, None
    back, model = record_store.load_record(path)
    assert back == json.loads(json.dumps(record))
    assert model.metrics.test_accuracy == 0.5 and model.metrics.steps == 3 and model.method.name == "softmax"


def test_every_record_published_under_results_validates():
    found = sorted((REPO / "results").rglob("*.json"))
    loaded = [record_store.load_record(path)[1] for path in found]  # RecordError names the first that does not
    assert {model.kind for model in loaded} >= {"train", "kernel", "fidelity", "decode"}
