"""mode=fidelity: the entry point at budget smoke, the measurements where the truth is known, the
1/sqrt(d_phi) law of FAVOR+, the decomposition's bounds, and the answers to bad input."""

from __future__ import annotations

import math

import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from torch import nn

import methods
from methods.base import AttentionMethod
from methods.registry import REGISTRY
from suite import modes, record_store
from suite.config import validate
from suite.errors import ConfigError
from suite.modes.common import select_grid
from suite.modes.fidelity import capture as fidelity_capture
from suite.modes.fidelity import job as fidelity
from suite.modes.fidelity.fit import cross_entropy_terms
from suite.modes.fidelity.measure import ScaledWeights, method_weights, query_errors, scale_rows, scores
from suite.run import run
from suite.validate import MARKUP
from tests.conftest import CONF_DIR
from tests.test_cli import cli

CPU = torch.device("cpu")
HEAD_DIM = 16


def synthetic(std: float, n: int, sequences: int = 2, seed: int = 0) -> dict:
    grid = {"seq_lens": [n], "score_stds": [std], "sequences": sequences}
    return fidelity.synthetic_sources(grid, HEAD_DIM, seed, CPU)[0]


def measure(method: str, std: float, n: int = 64, queries: int = 32, draws: int = 1, sequences: int = 2,
            **options) -> dict:
    modules = fidelity.build_modules({"name": method, "options": options}, {}, HEAD_DIM, draws, CPU)
    return fidelity.measure_cell(modules, synthetic(std, n, sequences), n, queries, seed=0)


@pytest.mark.slow
def test_cli_smoke_writes_a_fidelity_record_for_every_cell(tmp_path, data_dir):
    results = tmp_path / "results"
    done = cli("mode=fidelity", "method=favor", "budget=smoke", f"results_dir={results}", data_dir=data_dir,
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    [path] = list(results.rglob("*.json"))
    record = record_store.read_record(path)
    assert record["kind"] == "fidelity" and record["status"] == "ok" and record["method"]["name"] == "favor"
    grid = record["config"]["mode"]["grids"]["smoke"]
    points = record["metrics"]["points"]
    sources = record["task"]["sources"]
    assert any(s.startswith("listops layer") for s in sources) and any(s.startswith("synthetic") for s in sources)
    cells = {(p["source"], p["seq_len"], p["d_phi"]) for p in points}
    assert cells == {(s, n, m) for s in sources for n in grid["seq_lens"] for m in grid["d_phi"]}
    for p in points:
        stats = p["denominator_rel_error"]
        assert set(stats) == {"mean", "median", "p95", "max"}
        assert all(math.isfinite(v) and v >= 0 for v in stats.values()), p
        assert stats["median"] <= stats["p95"] <= stats["max"]
    # The job writes its record only (the site draws the plots from it); the table puts the
    # denominator first.
    assert [p.name for p in path.parent.iterdir()] == [path.name]
    header = next(line for line in done.stdout.splitlines() if line.startswith("source"))
    assert header.index("denominator err") < header.index("numerator err") < header.index("output err")
    assert f"record: {path}" in done.stdout


def test_softmax_fidelity_run_writes_its_exact_reference_record(make_config):
    # mode=fidelity method=softmax did all the work, then refused its own record (d_phi must be positive)
    path, outcome = run(make_config("mode=fidelity", "method=softmax"))
    record = record_store.read_record(path)  # validates on reading too
    assert outcome.status == "ok" and record["status"] == "ok" and record["metrics"]["points"]
    assert {p["d_phi"] for p in record["metrics"]["points"]} == {None}  # the exact reference has no features


def test_taylor_is_exact_on_tiny_scores():
    cell = measure("taylor", std=1e-3)  # exp(s) - (1 + s + s^2/2) = s^3/6 ~ 1e-10
    for name in ("denominator_rel_error", "numerator_rel_error", "output_rel_error", "attention_tv"):
        assert cell[name]["max"] < 1e-5, (name, cell[name])
    assert cell["denominator_rel_error"]["max"] < 1e-6


def test_favor_with_many_features_is_close():
    cell = measure("favor", std=0.05, num_features=4096)
    assert cell["denominator_rel_error"]["mean"] < 0.02, cell["denominator_rel_error"]
    assert cell["output_rel_error"]["mean"] < 0.05, cell["output_rel_error"]
    assert cell["attention_tv"]["mean"] < 0.02, cell["attention_tv"]


def test_softmax_reference_errs_by_float32_rounding_only():
    cell = measure("softmax", std=2.0)
    for name in fidelity.ERROR_NAMES:
        assert cell[name]["max"] < 1e-5, (name, cell[name])


def test_favor_denominator_error_falls_as_inverse_sqrt_of_features():
    features = [16, 64, 256, 1024]
    errors = [measure("favor", std=0.25, draws=8, sequences=4, num_features=m)["denominator_rel_error"]["mean"]
              for m in features]
    point = lambda m, e: {"source": "s", "seq_len": 64, "d_phi": m, "variant": {"num_features": m},  # noqa: E731
                          "denominator_rel_error": {"mean": e}}
    [slope] = fidelity.slopes([point(m, e) for m, e in zip(features, errors)])
    assert -0.65 <= slope["denominator_error_slope"] <= -0.35, (slope, errors)


@pytest.mark.parametrize("method, std, options", [
    ("favor", 1.0, {"num_features": 32}), ("favor", 3.0, {"num_features": 64}), ("taylor", 2.0, {}),
    ("linear", 1.0, {}),
])
def test_decomposition_parts_bound_the_total(method, std, options):
    # o^ - o = (N^ - N)/(D^+eps) + o (D/(D^+eps) - 1): the total lies within the triangle bounds of its parts.
    source = synthetic(std, 64)
    module = methods.build(method, head_dim=HEAD_DIM, impl="naive", **options)
    index = torch.arange(64)
    errors = query_errors(scores(source["q"], source["k"]), source["v"],
                          method_weights(module, source["q"], source["k"], index))
    numerator_part = errors["output_rel_error_approx_numerator"] / errors["denominator_ratio"]
    denominator_part = errors["output_rel_error_approx_denominator"]
    total = errors["output_rel_error"]
    slack = 1e-9 * (1 + numerator_part + denominator_part)
    assert (total <= numerator_part + denominator_part + slack).all()
    assert (total >= (numerator_part - denominator_part).abs() - slack).all()
    assert torch.equal(errors["output_rel_error_approx_numerator"], errors["numerator_rel_error"])
    # The denominator-only part is a function of the denominator's error alone: |1/(1+delta) - 1|.
    ratio = errors["denominator_ratio"]
    assert torch.allclose(denominator_part, (1 / ratio - 1).abs(), rtol=1e-9)


def loglinear_with_unequal_levels() -> nn.Module:
    module = methods.build("loglinear", head_dim=HEAD_DIM, impl="naive")
    with torch.no_grad():  # lambda != 1, so that a wrong level would show
        module.level_weight.normal_(0, 0.3, generator=torch.Generator().manual_seed(1))
        module.level_bias.normal_(0, 1.0, generator=torch.Generator().manual_seed(2))
    return module


@pytest.mark.parametrize("causal", [False, True], ids=["non-causal", "causal"])
@pytest.mark.parametrize("name", ["favor", "taylor", "linear", "loglinear", "softmax", "sliding_window"])
def test_weights_give_each_methods_own_output(name, causal):
    # Causal: the errors a decoder's capture is measured by are those of the method's own causal forward.
    source = synthetic(1.0, 48)
    q, k, v = source["q"], source["k"], source["v"]
    options = {"window": 9} if name == "sliding_window" else {}
    module = (loglinear_with_unequal_levels() if name == "loglinear"
              else methods.build(name, head_dim=HEAD_DIM, impl="naive", **options))
    positions = torch.arange(48) if causal else None
    exact = torch.softmax(scores(q, k, positions), -1) @ v.double()
    own = module(q, k, v, causal=causal).double()
    expected = (own - exact).norm(dim=-1) / exact.norm(dim=-1)
    measured = query_errors(scores(q, k, positions), v,
                            method_weights(module, q, k, torch.arange(48), causal))["output_rel_error"]
    assert torch.allclose(measured, expected, rtol=1e-3, atol=2e-6), (measured - expected).abs().max()
    if causal:  # the first query sees one key: its normalised weight is exact attention, up to the
        assert measured[..., 0].max() < 1e-4  # denominator's epsilon against a small weight (favor: 1e-5)


def test_causal_rows_fit_softmax_to_its_own_entropy_and_the_first_query_to_zero():
    source = synthetic(2.0, 32)
    softmax = methods.build("softmax", head_dim=HEAD_DIM)
    positions = torch.arange(32)
    cross, entropy = cross_entropy_terms(softmax, source["q"], source["k"], positions, causal=True)
    assert torch.allclose(cross, entropy, atol=1e-5)  # softmax's own weights: the floor
    assert entropy[..., 0].abs().max() < 1e-12  # one key, one certain weight
    full, _ = cross_entropy_terms(softmax, source["q"], source["k"], positions)
    assert (full[..., 0] > 0.5).all()  # non-causal, the first query spreads over all 32 keys


class OverflowingMap(nn.Module):
    """A feature-map method whose float32 exponentials overflow for every query."""

    denominator_eps = 1e-6

    def feature_map(self, x: torch.Tensor, kind: str) -> torch.Tensor:
        return torch.exp(100.0 * x.float().abs())

    def log_weights(self, q: torch.Tensor, k: torch.Tensor, positions=None) -> torch.Tensor:
        return (self.feature_map(q, "query").double() @ self.feature_map(k, "key").double().transpose(-1, -2)).log()


def test_overflow_is_counted_and_shown_never_nan():
    source = synthetic(1.0, 32)
    cell = fidelity.measure_cell([OverflowingMap()], source, 32, 8, seed=0)
    assert cell["overflow_queries"] == cell["queries"] == 16
    assert all(cell[name] is None for name in fidelity.ERROR_NAMES)
    point = {"source": "s", "seq_len": 32, "d_phi": 16, **cell}
    rendered = "\n".join(fidelity.table([point]))
    assert "overflow" in rendered and "nan" not in rendered.lower()


def test_underflowed_weights_count_and_give_a_zero_output():
    errors = query_errors(torch.full((1, 3, 5), 2.0, dtype=torch.float64), torch.randn(1, 5, 4),
                          scale_rows(torch.zeros(1, 3, 5), eps=1e-6))
    assert errors["underflow"].all() and not errors["overflow"].any()
    assert torch.allclose(errors["denominator_rel_error"], torch.ones(1, 3, dtype=torch.float64), atol=1e-9)
    # N^ = 0: the method outputs 0
    assert torch.allclose(errors["output_rel_error"], torch.ones(1, 3, dtype=torch.float64))


def test_denominators_beyond_float64_exp_are_compared_in_log_space():
    s = torch.tensor([[[800.0, 799.0]]], dtype=torch.float64)  # exp(800) overflows float64
    weights = ScaledWeights(torch.tensor([[[1.0, math.exp(-1.0)]]], dtype=torch.float64),
                            torch.tensor([[800.0 + math.log(1.1)]], dtype=torch.float64))
    errors = query_errors(s, torch.ones(1, 2, 3), weights)
    assert not errors["overflow"].any()
    assert errors["denominator_rel_error"].item() == pytest.approx(0.1, rel=1e-9)


@pytest.mark.parametrize("override, named", [
    ("mode.grids.smoke.d_phi=[]", "mode.grids.smoke.d_phi must be a non-empty list of positive integers, got []"),
    ("mode.grids.smoke.d_phi=[8,-4]",
     "mode.grids.smoke.d_phi must be a non-empty list of positive integers, got [8, -4]"),
    ("mode.grids.smoke.seq_lens=[]", "mode.grids.smoke.seq_lens must be a non-empty list of positive integers, got []"),
    ("mode.grids.smoke.seq_lens=[0,32]", "mode.grids.smoke.seq_lens must be a non-empty list of positive integers"),
    ("mode.grids.smoke.queries=0", "mode.grids.smoke.queries must be a positive integer, got 0"),
])
def test_bad_grid_is_one_clear_error_before_any_work(make_config, tmp_path, override, named):
    config = make_config("mode=fidelity", "method=favor", override)
    with pytest.raises(ConfigError) as caught:
        run(config)
    assert named in str(caught.value)
    assert not list((tmp_path / "results").rglob("*.json"))


def test_a_method_without_attention_weights_has_a_not_applicable_record(make_config, monkeypatch):
    class WindowAttention(AttentionMethod):
        name = "window_for_test"
        impls = ("naive",)
        cpu_default = "naive"

    monkeypatch.setitem(REGISTRY, WindowAttention.name, WindowAttention)
    config = make_config("mode=fidelity", "method=favor")
    config["method"] = {"name": "window_for_test", "impl": "auto", "options": {}}
    path, outcome = run(config)
    record = record_store.read_record(path)
    assert outcome.status == record["status"] == "not_applicable" and set(record["metrics"]) == {"wall_time_s"}
    assert record["error"] == ("mode=fidelity needs what method 'window_for_test' does not implement: "
                               "weights (log_weights)")


def test_capture_model_is_trained_once_then_loaded(make_config):
    config = make_config("mode=fidelity", "method=favor")
    cfg = fidelity_capture.capture_config(config, config["mode"]["grids"]["smoke"]["capture"])
    first, _, _ = fidelity_capture.trained_model(cfg, CPU)
    second, data, facts = fidelity_capture.trained_model(cfg, CPU)
    assert not facts["trained_now"] and fidelity_capture.checkpoint_path(cfg, CPU).exists()
    assert facts["causal"] is False  # ListOps: an encoder, so the record's rows are non-causal
    for (key, a), b in zip(first.state_dict().items(), second.state_dict().values()):
        assert torch.equal(a, b), key
    examples = fidelity_capture.longest_examples(data.test, 2)
    [(q, k, v)] = fidelity_capture.attention_inputs(second, examples, CPU)  # the smoke model has one layer
    assert q.shape == k.shape == (2, config["model"]["num_heads"], min(len(e) for e in examples), HEAD_DIM)


def test_a_cpu_board_recall_point_has_a_grid_that_captures_from_its_own_model(tmp_path, data_dir):
    # Issue 44 item 4: a captured source must come from a model that learned. On a CPU that is the
    # board's MQAR point (softmax at 99% against a 1 / 16 baseline in minutes), whose budget is cpu.
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        composed = compose("config", overrides=["mode=fidelity", "method=favor", "point=cpu_mqar_64x16",
                                                f"results_dir={tmp_path / 'results'}", f"data_dir={data_dir}"])
    config = OmegaConf.to_container(composed, resolve=True)
    validate(config, modes.run_schemas())
    grid = select_grid(config)
    cfg = fidelity_capture.capture_config(config, grid["capture"])
    assert config["budget"]["name"] == "cpu" and grid["captured"]
    assert cfg["task"] == config["task"] and cfg["budget"] == config["budget"]  # the point's run, as trained
    assert max(grid["seq_lens"]) <= cfg["task"]["seq_len"]  # the captured source is measured at every N
    # MQAR's examples are one sequence each, so the capture takes them (a two-step model here).
    cfg["budget"] = {**cfg["budget"], "max_steps": 2, "eval_every": 2, "num_train": 64, "num_val": 16,
                     "num_test": 16, "checkpoint_every": None}
    model, data, facts = fidelity_capture.trained_model(cfg, CPU)
    assert facts["baseline_accuracy"] == pytest.approx(1 / 16)
    assert facts["causal"] is True  # MQAR: a decoder, so the record's rows are causal
    examples = fidelity_capture.longest_examples(data.test, 2)
    [(q, k, v)] = fidelity_capture.attention_inputs(model, examples, CPU)  # hybrid: conv, then one attention layer
    assert q.shape == k.shape == v.shape == (2, 1, 64, 64)


@pytest.mark.parametrize("name", methods.available())
def test_a_methods_fidelity_note_is_text_that_validate_accepts_in_its_record(name):
    # sliding_window's "|i - j| < window" read as the start of a tag: its every fidelity record was refused
    note = methods.get(name).fidelity_note or ""
    assert not MARKUP.search(note), note
