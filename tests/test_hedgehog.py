"""Hedgehog: the learned softmax-pair map, its initialisation, its options, its parameters and FLOPs,
and its fit to softmax attention. Its paths against the naive definition (outputs and the gradients
of q, k, v, W and b) and its recurrent form are the contract's (tests/test_methods.py)."""

from __future__ import annotations

import pytest
import torch

import methods
from methods.base import MethodError
from suite import records
from suite.model import MultiHeadAttention
from suite.modes.fidelity import job as fidelity
from suite.modes.fidelity.fit import fit_to_softmax, mean_cross_entropy, split_queries
from tests.utils import assert_close

CHUNK = 16


def hedgehog(head_dim: int, feature_dim: int, impl: str, seed: int = 0) -> methods.AttentionMethod:
    """A map away from its initialisation (random W and a non-zero b), the same for every impl."""
    torch.manual_seed(seed)
    module = methods.build("hedgehog", head_dim=head_dim, impl=impl, chunk_size=CHUNK, feature_dim=feature_dim)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.normal_(0.0, 0.7)
    return module


def softmax_pair(x: torch.Tensor, linear: torch.nn.Linear) -> torch.Tensor:
    y = (x.double() @ linear.weight.double().T + linear.bias.double())
    return torch.cat([torch.softmax(y, -1), torch.softmax(-y, -1)], -1)


def test_features_are_the_softmax_pair_of_each_kinds_own_projection():
    module = hedgehog(12, 6, "naive")
    x = 3 * torch.randn(2, 3, 10, 12)
    for kind, linear in (("query", module.query_map), ("key", module.key_map)):
        phi = module.feature_map(x, kind)
        assert phi.shape == (2, 3, 10, 12) and module.num_features == 12
        assert_close(kind, softmax_pair(x, linear), phi.double(), 1e-6)
    with pytest.raises(MethodError, match="feature kind must be one of query, key"):
        module.feature_map(x, "value")


def test_huge_logits_stay_finite_on_every_path():
    module = hedgehog(8, 5, "chunk")
    q, k, v = 1e4 * torch.randn(1, 2, 40, 8), 1e4 * torch.randn(1, 2, 40, 8), torch.randn(1, 2, 40, 3)
    for causal in (False, True):
        out = module(q, k, v, causal)
        assert torch.isfinite(out).all()


def test_initial_maps_are_one_semi_orthogonal_draw_for_queries_and_keys():
    wide, narrow = methods.build("hedgehog", head_dim=8, feature_dim=20), methods.build("hedgehog", head_dim=8,
                                                                                       feature_dim=3)
    for module in (wide, narrow):
        w = module.query_map.weight.detach().double()
        assert torch.equal(module.query_map.weight, module.key_map.weight)
        assert not module.query_map.bias.any() and not module.key_map.bias.any()
        gram = w.T @ w if w.shape[0] >= w.shape[1] else w @ w.T  # orthonormal columns (or rows)
        assert_close("W^T W", torch.eye(len(gram), dtype=torch.float64), gram, 1e-5)
    assert methods.build("hedgehog", head_dim=8).resolved_options() == {"chunk_size": 64, "feature_dim": 8,
                                                                      "num_features": 16}


@pytest.mark.parametrize("options, message", [
    ({"feature_dim": 0}, "hedgehog: option feature_dim must be an integer >= 1, got 0"),
    ({"feature_dim": "16"}, "hedgehog: option feature_dim must be an integer >= 1, got '16'"),
    ({"feature_dim": True}, "hedgehog: option feature_dim must be an integer >= 1, got True"),
])
def test_bad_options_are_named(options, message):
    with pytest.raises(MethodError, match=message):
        methods.build("hedgehog", head_dim=8, **options)


def test_the_maps_count_in_the_models_parameters():
    def count(name: str, options: dict) -> int:
        layer = MultiHeadAttention(32, 2, {"name": name, "impl": "auto", "options": options})
        return sum(p.numel() for p in layer.parameters())

    # Two maps (queries, keys) of W (7 x 16) and b (7), shared by both heads.
    assert count("hedgehog", {"feature_dim": 7}) - count("softmax", {}) == 2 * (7 * 16 + 7)


def test_feature_map_flops_are_the_two_projections():
    module = methods.build("hedgehog", head_dim=16, feature_dim=24)
    assert module.feature_map_flops(100, "chunk", True) == (2 * 2.0 * 100 * 16 * 24, 4 * 2.0 * 100 * 16 * 24)


def test_only_hedgehog_declares_parameters_to_fit_and_its_fidelity_variants_match_feature_counts():
    assert [name for name in methods.available() if methods.get(name).fits_attention()] == ["hedgehog"]
    module = methods.build("hedgehog", head_dim=8, feature_dim=4)
    assert {id(p) for p in module.attention_fit_parameters()} == {id(p) for p in module.parameters()}
    assert methods.get("hedgehog").fidelity_variants([8, 32, 33]) == [{"feature_dim": 4}, {"feature_dim": 16}]


def toy_attention(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """q, k whose softmax attention is peaked (score std about 2) and structured: keys near a few
    directions, so the rows are learnable from one half of the queries and hold on the other."""
    gen = torch.Generator().manual_seed(seed)
    centres = torch.randn(4, 8, generator=gen)
    k = centres[torch.randint(0, 4, (2, 2, 64), generator=gen)] + 0.3 * torch.randn(2, 2, 64, 8, generator=gen)
    q = centres[torch.randint(0, 4, (2, 2, 64), generator=gen)] + 0.3 * torch.randn(2, 2, 64, 8, generator=gen)
    return 1.2 * q, 1.2 * k


def test_fitting_lowers_the_held_out_cross_entropy_and_is_deterministic():
    q, k = toy_attention()
    fit, held = split_queries(64, seed=0)
    assert len(fit) == len(held) == 32 and not set(fit.tolist()) & set(held.tolist())
    settings = {"steps": 60, "lr": 2e-2, "queries": 8}
    results = []
    for _ in range(2):
        torch.manual_seed(0)
        module = methods.build("hedgehog", head_dim=8, impl="naive", feature_dim=8).eval()
        facts = fit_to_softmax(module, q, k, fit, held, settings, seed=0)
        results.append((facts, [p.detach().clone() for p in module.parameters()]))
    facts = results[0][0]
    held_ce, floor = facts["held_out_cross_entropy"], facts["held_out_softmax_entropy"]
    # The fit closes most of the gap to softmax's entropy (the floor) on queries it never saw.
    assert floor < held_ce["fitted"] < held_ce["initial"]
    assert held_ce["fitted"] - floor < 0.5 * (held_ce["initial"] - floor), facts
    assert facts["fit_cross_entropy"]["fitted"] < facts["fit_cross_entropy"]["initial"]
    assert mean_cross_entropy(module, q, k, held)[0] == pytest.approx(held_ce["fitted"])
    assert results[0][0] == results[1][0]
    assert all(torch.equal(a, b) for a, b in zip(results[0][1], results[1][1]))


def test_fidelity_fits_on_captured_queries_and_measures_both_maps_on_the_held_out_ones(make_config):
    config = make_config("mode=fidelity", "method=hedgehog", "mode.grids.smoke.d_phi=[8]",
                         "mode.grids.smoke.seq_lens=[32]", "mode.grids.smoke.score_stds=[1.0]",
                         "mode.grids.smoke.queries=32", "mode.grids.smoke.fit.steps=20")
    result = fidelity.job(config, torch.device("cpu"), records.config_hash(config, "cpu"))
    points = result.outcome.metrics["points"]
    by_map = {(p["method"], p["source_kind"]) for p in points}
    assert by_map == {("hedgehog", "synthetic"), ("hedgehog", "captured"), ("hedgehog fitted", "captured")}
    initial = next(p for p in points if p["method"] == "hedgehog" and p["source_kind"] == "captured")
    fitted = next(p for p in points if p["method"] == "hedgehog fitted")
    assert initial["d_phi"] == fitted["d_phi"] == 8 and initial["queries"] == fitted["queries"]
    [facts] = fitted["fit"]
    assert facts["steps"] == 20 and facts["fit_queries"] + facts["held_out_queries"] == facts["keys"]
    # Measured on held-out queries only: below N = 32 the source holds fewer of them than the grid's 32.
    held_below = int((split_queries(facts["keys"], config["seed"])[1] < 32).sum())
    assert held_below < 32 and initial["queries"] == held_below * 2 * config["model"]["num_heads"]
    rendered = fidelity.table(points)
    assert rendered[0].startswith("map") and any(row.startswith("hedgehog fitted") for row in rendered)
    # A method with nothing to fit is measured on the same held-out queries, and only as built.
    config["method"] = {"name": "linear", "impl": "auto", "options": {"chunk_size": 64}}
    linear = fidelity.job(config, torch.device("cpu"), records.config_hash(config, "cpu")).outcome.metrics["points"]
    assert {p["method"] for p in linear} == {"linear"}
    assert next(p for p in linear if p["source_kind"] == "captured")["queries"] == initial["queries"]
