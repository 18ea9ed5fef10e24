"""The recurrent form of every method (the decoding contract) and mode=decode end to end."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import methods
from methods.base import MethodError
from methods.softmax.cache import held
from suite import record_store
from suite.errors import ConfigError
from suite.modes.decode import job as decode
from suite.run import run
from tests.utils import assert_close

REPO = Path(__file__).resolve().parent.parent
BATCH, HEADS, DIM, VALUE_DIM = 2, 3, 8, 5
LENGTHS = [1, 7, 16, 33]  # powers of two and not
# Every method with its default options, and loglinear once more with its decay gate.
CASES = [(name, {}) for name in methods.available()] + [("loglinear", {"decay": True})]
CASE_IDS = [name + "".join(f"-{key}" for key in options) for name, options in CASES]


def build(name: str, options: dict, impl: str = "naive") -> methods.AttentionMethod:
    """The method with its learned parameters moved off their initial values, so that e.g.
    loglinear's level weights differ per level and its Fenwick structure shows in the output."""
    torch.manual_seed(0)
    module = methods.build(name, head_dim=DIM, impl=impl, **options)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.add_(0.5 * torch.randn_like(parameter))
    return module.eval()


def prompt(n: int, batch: int = BATCH) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(n)
    return tuple(torch.randn(batch, HEADS, n, d, generator=generator) for d in (DIM, DIM, VALUE_DIM))


def step_through(module, q, k, v, state=None):
    """(outputs (B,H,N,E), final state) of stepping token by token from ``state`` (default: empty)."""
    if state is None:
        state = module.init_state(q.shape[0], HEADS, DIM, VALUE_DIM)
    outputs = []
    for t in range(q.shape[2]):
        o_t, state = module.step(q[:, :, t], k[:, :, t], v[:, :, t], state)
        outputs.append(o_t)
    return torch.stack(outputs, dim=2), state


def contents(state: dict) -> dict[str, torch.Tensor]:
    """What a state holds: a KV cache without its unused capacity, any other state as it is."""
    if set(state) == {"k", "v", "length"}:
        keys, values = held(state)
        return {"k": keys, "v": values, "length": state["length"]}
    return state


# -- the state built from a prompt (stepping against the parallel form: tests/test_methods.py) --
@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("name, options", CASES, ids=CASE_IDS)
def test_the_state_built_from_the_prompt_is_the_stepped_state(name, options, n):
    module = build(name, options)
    q, k, v = prompt(n + 3)
    prefix = (q[:, :, :n], k[:, :, :n], v[:, :, :n])
    _, stepped = step_through(module, *prefix)
    built = decode.prompt_state(module, *prefix)
    stepped_contents, built_contents = contents(stepped), contents(built)
    assert stepped_contents.keys() == built_contents.keys()
    for key, tensor in stepped_contents.items():
        assert_close(f"{name} state[{key}]", tensor.float(), built_contents[key].float(), 1e-5)
    # And decoding goes on from either state alike.
    suffix = (q[:, :, n:], k[:, :, n:], v[:, :, n:])
    assert_close(f"{name} next outputs", step_through(module, *suffix, stepped)[0],
                 step_through(module, *suffix, built)[0], 1e-5)


def test_a_kv_cache_built_from_the_prompt_holds_exactly_the_context():
    q, k, v = prompt(33)
    cache = decode.prompt_state(build("softmax", {}), q, k, v)
    assert decode.state_bytes(cache) == (k.nbytes + v.nbytes) + 8  # plus the int64 length


def test_a_kv_cache_step_writes_in_place_and_grows_by_doubling():
    module = build("softmax", {})
    q, k, v = prompt(9)
    state = module.init_state(BATCH, HEADS, DIM, VALUE_DIM)
    capacities, copies, last = [], 0, None
    for t in range(9):
        _, state = module.step(q[:, :, t], k[:, :, t], v[:, :, t], state)
        capacities.append(state["k"].shape[2])
        copies += state["k"].data_ptr() != last
        last = state["k"].data_ptr()
    assert capacities == [1, 2, 4, 4, 8, 8, 8, 8, 16]
    assert copies == 5  # one allocation per doubling, none on the other steps


# -- loglinear's Fenwick states -------------------------------------------------------------------
def test_loglinear_live_states_and_bytes_grow_logarithmically():
    module = build("loglinear", {})
    per_level = (DIM * VALUE_DIM + DIM) * 4  # one float32 (kv, z) pair for one sequence and head
    state = module.init_state(1, 1, DIM, VALUE_DIM)
    bytes_at = {}
    for t in range(1, 1024):
        x = torch.randn(1, 1, DIM)
        _, state = module.step(x, x, x[..., :VALUE_DIM], state)
        assert module.live_states(state) <= math.floor(math.log2(t)) + 1
        bytes_at[t] = decode.state_bytes(state)
    levels = range(1, 11)
    growth = [bytes_at[2**k - 1] - bytes_at[2**(k - 1) - 1] if k > 1 else None for k in levels]
    assert growth[1:] == [per_level] * 9  # linear in k at T = 2^k - 1


def test_loglinear_state_from_a_long_prompt_has_one_level_per_set_bit():
    module = build("loglinear", {})
    for k_bits in (12, 16):
        n = 2**k_bits - 1
        keys = torch.randn(1, 1, n, DIM)
        state = decode.prompt_state(module, keys, keys, keys[..., :VALUE_DIM])
        assert module.live_states(state) == k_bits
        assert sorted(key for key in state if key.startswith("kv_level")) == sorted(
            f"kv_level{level}" for level in range(1, k_bits + 1))


# -- states that do not fit -----------------------------------------------------------------------
def stepped_state(name: str, batch: int = BATCH, value_dim: int = VALUE_DIM):
    """A state of ``name`` after two steps."""
    module = build(name, {})
    state = module.init_state(batch, HEADS, DIM, value_dim)
    for _ in range(2):
        x = torch.randn(batch, HEADS, DIM)
        _, state = module.step(x, x, x[..., :value_dim], state)
    return state


@pytest.mark.parametrize("name", methods.available())
def test_stepping_with_a_foreign_or_misshapen_state_is_a_clear_error(name):
    module = build(name, {})
    q_t, k_t, v_t = torch.randn(BATCH, HEADS, DIM), torch.randn(BATCH, HEADS, DIM), torch.randn(BATCH, HEADS, VALUE_DIM)
    wrong = {f"{other}'s state": stepped_state(other) for other in methods.available() if other != name}
    wrong["a state for batch 3"] = stepped_state(name, batch=3)
    wrong["a state for value_dim 4"] = stepped_state(name, value_dim=4)
    wrong["a tuple"] = (torch.zeros(1),)
    for what, state in wrong.items():
        with pytest.raises(MethodError, match=name) as caught:
            module.step(q_t, k_t, v_t, state)
        assert "\n" not in str(caught.value), what


# -- the crossover -----------------------------------------------------------------------------------
def points(**latencies) -> list[dict]:
    """Points at batch 1 for contexts c<N>=latency (None: oom)."""
    return [{"batch_size": 1, "context_length": int(key[1:]), "status": "ok" if value is not None else "oom",
             "decode_latency_median_s": value} for key, value in latencies.items()]


@pytest.mark.parametrize("ours, theirs, expected", [
    (dict(c1=5, c2=2, c3=1), dict(c1=1, c2=3, c3=4), 2),
    (dict(c1=1, c2=5, c3=1), dict(c1=2, c2=3, c3=4), 3),  # an early win that does not last
    (dict(c1=5, c2=5, c3=1), dict(c1=1, c2=1, c3=None), 3),  # the reference ran out of memory
    (dict(c1=1, c2=1, c3=None), dict(c1=2, c2=2, c3=2), None),  # ours did
])
def test_crossover_is_the_context_from_which_on_the_method_wins(ours, theirs, expected):
    assert decode.beats_from(points(**ours), points(**theirs), 1, "decode_latency_median_s") == expected


# -- mode=decode end to end --------------------------------------------------------------------------
def read_only_record(results: Path) -> dict:
    written = [p for p in results.rglob("*") if p.is_file()]
    assert len(written) == 1, written
    return record_store.read_record(written[0])


def test_decode_job_writes_a_record_with_every_point_and_the_reference(make_config):
    config = make_config("mode=decode", "method=loglinear", "device=cpu")
    threads_before = torch.get_num_threads()
    path, outcome = run(config)
    record = record_store.read_record(path)
    assert outcome.status == record["status"] == "ok" and record["kind"] == "decode"
    assert record["metrics"]["cpu_threads"] == 1 and torch.get_num_threads() == threads_before
    grid = config["mode"]["grids"]["smoke"]
    m = record["metrics"]
    expected = [(b, c) for b in grid["batch_sizes"] for c in grid["context_lengths"]]
    for key in ("points", "reference"):
        block = m[key] if key == "points" else m[key]["points"]
        assert [(p["batch_size"], p["context_length"]) for p in block] == expected
        for point in block:
            assert point["status"] == "ok"
            assert 0 < point["decode_latency_median_s"] <= point["decode_latency_p99_s"]
            assert point["prefill_s"] > 0 and point["decode_tokens_per_s"] > 0
    heads, dim = config["model"]["num_heads"], config["model"]["d_model"] // config["model"]["num_heads"]
    for point in m["points"]:  # one (kv, z) pair per set bit of the context length
        assert point["live_states"] == bin(point["context_length"]).count("1")
        level_bytes = point["batch_size"] * heads * (dim * dim + dim) * 4
        assert point["state_bytes"] == point["live_states"] * level_bytes + 8 + 4 * 8
    for point in m["reference"]["points"]:  # the KV cache holds every token of the context
        assert point["state_bytes"] == point["batch_size"] * heads * point["context_length"] * 2 * dim * 4 + 8
    assert m["reference"]["method"] == "softmax"
    assert [c["batch_size"] for c in m["crossovers"]] == grid["batch_sizes"]
    assert all(c["memory_crossover_context"] == 64 for c in m["crossovers"])  # 64 = one level < 64 cached tokens


def test_points_beyond_memory_are_oom_and_the_sweep_goes_on(make_config, monkeypatch):
    real = decode.prompt_state

    def failing(module, q, k, v):
        if q.shape[2] == 64:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 1 GiB")
        return real(module, q, k, v)

    monkeypatch.setattr(decode, "prompt_state", failing)
    monkeypatch.setattr(decode, "free_memory_bytes", lambda device: 10_000)  # context 7 fits, 64 does not
    path, outcome = run(make_config("mode=decode", "method=linear", "device=cpu", "mode.reference=null"))
    record = record_store.read_record(path)
    assert outcome.status == "ok" and "reference" not in record["metrics"]
    statuses = {(p["batch_size"], p["context_length"]): p["status"] for p in record["metrics"]["points"]}
    assert statuses == {(1, 1): "ok", (1, 7): "ok", (1, 64): "oom", (2, 1): "ok", (2, 7): "ok", (2, 64): "oom"}
    assert "free" in record["metrics"]["points"][2]["error"]


def test_failing_allocations_mid_point_are_oom(make_config, monkeypatch):
    def failing(module, q, k, v):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 1 GiB")

    monkeypatch.setattr(decode, "prompt_state", failing)
    path, outcome = run(make_config("mode=decode", "method=softmax", "device=cpu"))
    record = record_store.read_record(path)
    assert outcome.status == record["status"] == "oom"
    assert {p["error"] for p in record["metrics"]["points"]} == {"CUDA out of memory. Tried to allocate 1 GiB"}


@pytest.mark.parametrize("overrides, named", [
    (("budget.name=huge",), "no grid for budget 'huge'; valid budgets: smoke, small, paper"),
    (("mode.grids.smoke.context_lengths=[0,4]",), "context_lengths must be a non-empty list of positive integers"),
    (("mode.grids.smoke.timed_steps=0",), "timed_steps must be a positive integer, got 0"),
    (("mode.grids.smoke.dtype=int8",), "dtype must be one of float32, bfloat16, float16, got 'int8'"),
    (("method=loglinear", "method.options.num_levels=5"), "takes at most 16"),
    (("mode.reference=nope",), "valid methods"),
    (("mode.cpu_threads=0",), "mode.cpu_threads must be a positive integer or null"),
])
def test_impossible_decode_configs_are_one_clear_error(make_config, overrides, named):
    config = make_config("mode=decode", "device=cpu", *overrides)
    with pytest.raises((ConfigError, MethodError), match=named.replace("[", r"\[").replace("(", r"\(")):
        run(config)


def test_decode_runs_from_a_plain_dict_without_hydra_datasets_or_wandb(make_config, tmp_path):
    config = make_config("mode=decode", "method=favor", "device=cpu")
    script = (
        "import json, sys\n"
        "for name in ('hydra', 'omegaconf', 'datasets', 'wandb'):\n"
        "    sys.modules[name] = None  # any import of them fails\n"
        "from suite.run import run\n"
        f"path, outcome = run(json.loads({json.dumps(json.dumps(config))}))\n"
        "assert outcome.status == 'ok', outcome\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert read_only_record(Path(config["results_dir"]))["kind"] == "decode"


def test_cli_decode_loglinear_smoke_writes_a_record(tmp_path, data_dir):
    results = tmp_path / "results"
    env = {**os.environ, "SUITE_DATA_DIR": str(data_dir), "SUITE_HYDRA_DIR": str(tmp_path / "hydra")}
    done = subprocess.run(
        [sys.executable, "-m", "suite", "mode=decode", "method=loglinear", "budget=smoke", f"results_dir={results}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    record = read_only_record(results)
    assert record["kind"] == "decode" and record["method"]["name"] == "loglinear"
    assert record["task"]["name"] == "decode" and record["status"] == "ok"
    assert "median/token" in done.stdout and "against softmax" in done.stdout
    assert f"record: {next(results.rglob('*.json'))}" in done.stdout


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("name", methods.available())
def test_decode_smoke_on_cuda(make_config, name):
    path, outcome = run(make_config("mode=decode", f"method={name}", "device=cuda"))
    record = record_store.read_record(path)
    assert outcome.status == "ok" and record["env"]["device"] == "cuda"
    assert all(p["status"] == "ok" for p in record["metrics"]["points"])
