"""Capabilities, not one contract for everything (DESIGN.md, "A method"): the core every method
implements, the capabilities it opts into (recurrent, flops, weights), the modes that need them,
and the record of a run a mode cannot make (status not_applicable, and why). The methods are the
outside ones of tests/outside_methods.py, named by import path as a user would name them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import methods
from methods import contract
from methods.base import CAPABILITIES, AttentionMethod, MethodError
from suite import modes, record_store, records, validate
from suite.run import run
from tests.outside_methods import (
    BROKEN,
    STATELESS,
    UNCOUNTED,
    BrokenAttention,
    LeakyAttention,
    ReluAttention,
    StatelessSoftmax,
)

REPO = Path(__file__).resolve().parent.parent


# -- the capabilities a class implements ------------------------------------------------------------
def test_capabilities_are_the_ones_a_class_implements_whole():
    assert StatelessSoftmax.capabilities() == {"flops"}
    assert BrokenAttention.capabilities() == {"flops", "recurrent"}

    class HalfRecurrent(StatelessSoftmax):
        name = "half_recurrent"

        def step(self, q_t, k_t, v_t, state):
            return v_t, state

    with pytest.raises(MethodError, match=r"^half_recurrent: implements step of the recurrent capability but not "
                                          r"init_state, prefill_state, state_bytes; implement all of "):
        HalfRecurrent.capabilities()
    [failure] = contract.check_method(HalfRecurrent)  # the kit says it as its core check's failure
    assert failure.check.kind == "core" and "capabilities: half_recurrent: implements step of" in failure.error


def test_a_class_without_the_core_fails_the_core_check_alone():
    class NoNaive(AttentionMethod):
        name = "no_naive"
        impls = ("fast",)
        cpu_default = "slow"
        time_in_length = "N^3"

    [failure] = contract.check_method(NoNaive)
    assert failure.check.kind == "core"
    assert "impls: ('fast',); expected a tuple that holds 'naive'" in failure.error
    assert "time_in_length: 'N^3'; expected one of N^2, N log N, N" in failure.error


def test_every_mode_needs_only_known_capabilities():
    needs = {name: mode.needs for name, mode in modes.registry().items()}
    assert set().union(*needs.values()) <= set(CAPABILITIES)
    assert needs["train"] == frozenset() and needs["decode"] == {"recurrent"}
    assert needs["fidelity"] == {"weights"} and needs["kernel"] == frozenset()  # timing needs no FLOP count
    assert needs["cost"] == frozenset()  # timing a model needs no recurrent form


# -- the kit on a broken method: a failure line per failed check ---------------------------------------
def test_the_kit_names_each_way_a_broken_method_fails():
    failures = contract.check_method(BrokenAttention)
    kinds = {f.check.kind for f in failures}
    assert kinds == {"path", "step", "state", "flops"}
    assert all(f.check.impl == "chunk" for f in failures if f.check.kind == "path")
    line = next(str(f) for f in failures if f.check.kind == "path")
    assert line.startswith("broken path chunk B=") and "float32" in line and ": o: relative error " in line
    assert "broken state B=2 N=5 D=16 E=7 float32: state_bytes declares 0 bytes, prefill_state holds 112" in map(
        str, failures)
    # stepping over one token is right even here: the step attends to the one token there is
    assert not [f for f in failures if f.check.kind == "step" and " N=1 " in f.check.case]


def test_the_kit_passes_a_method_without_a_recurrent_form_and_runs_no_state_check():
    cls = StatelessSoftmax
    kinds = {check.kind for check in contract.checks(cls)}
    assert kinds == {"core", "naive", "path", "flops"}
    assert contract.check_method(cls) == []


def test_the_naive_checks_catch_a_wrong_definition_in_each_way_they_look():
    """A naive-only method has no other path to be compared with: its definition is checked on its
    own, and each of the four ways LeakyAttention is wrong is one failure."""
    failures = [str(f) for f in contract.check_method(LeakyAttention) if f.check.kind == "naive"]
    shape = "leaky naive naive B=2 N=6 D=4 E=3 float32"
    assert any(line.startswith(f"{shape} full against float64 weights: o: relative error ") for line in failures)
    assert any(line.startswith(f"{shape} causal masking: o of tokens 0..2 after changing tokens 3..5: ")
               for line in failures)
    for kind in ("full", "causal"):
        assert any(line.startswith(f"{shape} {kind} batch independence: o of sequence 0 after changing sequence 1: ")
                   for line in failures), failures
        assert any(line.startswith(f"{shape} {kind} gradients by finite differences: direction 0: the gradients give")
                   for line in failures), failures
    assert len(failures) == 6, failures


def test_a_relu_feature_map_passes_the_kit_though_its_one_token_gradients_are_rounding():
    """Issue 46: at one token the chunked path's dq was 3.3e-3 from the float32 naive path's, which is
    itself 4.4e-3 from the float64 truth (the quantity is eps / den^2 times terms of order one); the
    bound is now the reference's own rounding spread there, and the path passes. A wrong path still
    fails at that shape (BrokenAttention's, above)."""
    assert [str(f) for f in contract.check_method(ReluAttention)] == []
    check = next(c for c in contract.path_checks(ReluAttention) if c.case == "B=2 N=1 D=5 E=3 chunk=16 float32 full")
    check.run()


# -- runs of a method without a recurrent form ---------------------------------------------------------
def test_a_method_without_a_recurrent_form_trains_and_has_no_state_size(make_config, registry_kept):
    name = methods.resolve(STATELESS).name
    config = make_config("task=mqar", "device=cpu")
    config["method"] = {"name": name, "impl": "auto", "options": {}}
    path, outcome = run(config)
    record = record_store.read_record(path)
    assert outcome.status == record["status"] == "ok" and record["kind"] == "train"
    assert record["metrics"]["state_bytes"] is None and record["metrics"]["test_accuracy"] is not None
    assert record["method"]["capabilities"] == ["flops"]
    assert validate.main([str(path)]) == 0


def test_decode_of_a_method_without_a_recurrent_form_is_not_applicable(make_config, registry_kept, capsys):
    name = methods.resolve(STATELESS).name
    config = make_config("mode=decode", "device=cpu")
    config["method"] = {"name": name, "impl": "auto", "options": {}}
    path, outcome = run(config)
    record = record_store.read_record(path)
    assert outcome.status == record["status"] == "not_applicable" and record["kind"] == "decode"
    assert path.parts[-4:-1] == ("decode", "decode", name)  # where the mode's ok records lie too (issue 46)
    reason = ("mode=decode needs what method 'stateless_softmax' does not implement: "
              "recurrent (init_state, prefill_state, step, state_bytes)")
    assert record["error"] == reason
    assert f"stateless_softmax, mode=decode: not applicable: {reason}" in capsys.readouterr().out
    assert validate.main([str(path)]) == 0
    capsys.readouterr()
    again, outcome = run(config)  # resuming: the answer is known, nothing runs and nothing is written
    assert (again, outcome.status) == (path, "skipped")
    assert capsys.readouterr().out.startswith(f"skipped: a not_applicable record of this run already exists: {path} ")
    assert len(list(Path(config["results_dir"]).rglob("*.json"))) == 1


def test_kernel_mode_times_a_method_that_declares_no_flops_and_leaves_its_rates_empty(make_config, registry_kept):
    """Issue 46: kernel mode refused a method without a FLOP count, though timing needs none."""
    name = methods.resolve(UNCOUNTED).name
    config = make_config("mode=kernel", "budget=smoke", "device=cpu")
    config["method"] = {"name": name, "impl": "auto", "options": {}}
    path, outcome = run(config)
    record = record_store.read_record(path)
    assert outcome.status == record["status"] == "ok", record["error"]
    own = [p for p in record["metrics"]["points"] if p["source"] == "method" and p["status"] == "ok"]
    assert own and all(p["fwdbwd_median_s"] > 0 for p in own)
    assert all(p["fwd_flops"] is None and p.get("fwdbwd_flops_per_s") is None for p in own)
    rows = [r for r in record["metrics"]["summary"] if r["impl"] == "naive"]  # causal and full
    assert rows and all(r["fwdbwd_median_s"] > 0 and r["fwdbwd_flops_per_s"] is None for r in rows)
    assert validate.main([str(path)]) == 0
    from suite.site import build_site

    report = build_site(Path(config["results_dir"]), Path(config["results_dir"]).parent / "site")
    assert report.runs == 1 and report.problems == []


def test_a_train_record_that_states_a_state_size_of_a_method_without_one_is_a_problem(make_config, registry_kept,
                                                                                      capsys):
    name = methods.resolve(STATELESS).name
    config = make_config("task=mqar", "device=cpu")
    config["method"] = {"name": name, "impl": "auto", "options": {}}
    path, _ = run(config)
    record = record_store.read_record(path)
    record["metrics"]["state_bytes"] = 1024
    problems = validate.declared_problems(path, record)
    assert [(p.field, p.expected) for p in problems] == [("metrics.state_bytes", "null (no decoding state)")]


# -- the command line ------------------------------------------------------------------------------------
def check_method_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "suite", "check-method", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=600)


def test_check_method_passes_a_builtin_method():
    done = check_method_cli("softmax")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == ""
    assert "check-method softmax (capabilities: flops, recurrent, weights): all " in done.stderr


def test_check_method_prints_a_line_per_failure_of_a_broken_method():
    done = check_method_cli(BROKEN)
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines == [str(f) for f in contract.check_method(BrokenAttention)]
    assert f"{len(lines)} of " in done.stderr


@pytest.mark.parametrize("args, says", [
    (("nope",), "error: unknown method 'nope'; valid methods: softmax, linear, favor, taylor, loglinear"),
    (("tests.outside_methods:Nope",), "error: cannot import method 'tests.outside_methods:Nope'"),
    (("torch:Tensor",), "error: 'torch:Tensor' is <class 'torch.Tensor'>, not a subclass of methods.AttentionMethod"),
    (("softmax", "--options", "{"), "error: --options is not JSON"),
    (("softmax", "--options", "[1]"), "error: --options must be a JSON object, got '[1]'"),
    (("softmax", "--options", '{"window": 3}'), "error: softmax: unknown option(s) window; valid options: none"),
])
def test_check_method_refuses_bad_input_in_one_line(args, says):
    done = check_method_cli(*args)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(says) and len(done.stderr.splitlines()) == 1, done.stderr



# -- the site -------------------------------------------------------------------------------------------
def test_the_site_shows_state_and_decode_as_not_applicable_to_a_method_without_a_recurrent_form(tmp_path):
    from suite.record_store import new_record, write_record
    from suite.site import build_site
    from suite.site.board import NO_STATE
    from tests.test_site import as_html, train_record

    results = tmp_path / "results"
    for seed in (0, 1):
        for method, state, capabilities in (("softmax", 4096, ["flops", "recurrent", "weights"]),
                                            ("stateless_softmax", None, ["flops"])):
            record = train_record(method, "mqar", seed, 0.9 - 0.1 * seed)
            record["task"]["num_kv_pairs"] = 4
            record["metrics"]["state_bytes"] = state
            record["method"]["capabilities"] = capabilities
            write_record(record, results)
    reason = "mode=decode needs what method 'stateless_softmax' does not implement: recurrent (...)"
    write_record(new_record("decode", config={"mode": {"name": "decode"}, "seed": 0},
                            config_hash=records.config_hash({"mode": {"name": "decode"}, "seed": 0}, "cpu"),
                            method={"name": "stateless_softmax", "impl": "auto", "params": {},
                                    "capabilities": ["flops"]},
                            task={"name": "mqar"}, metrics={}, env={"device": "cpu", "seed": 0},
                            status="not_applicable", error=reason), results)
    report = build_site(results, tmp_path / "out")
    assert report.problems == []
    board = (report.out_dir / "index.html").read_text()
    assert f'<span class="config" title="{NO_STATE}">state n/a</span>' in board
    assert board.count("state n/a") == 1 and "4.0 KiB state" in board  # softmax's KV cache
    assert f"Not on it: stateless_softmax (state size {NO_STATE})." in board  # the caption of accuracy vs state
    plots = (report.out_dir / "plots.html").read_text()
    reason = as_html(reason)  # as the pages write it
    assert f'title="{reason}">stateless_softmax</a> ({reason})' in plots
    runs = (report.out_dir / "runs.html").read_text()
    assert f'title="{reason}">n/a</td>' in runs
