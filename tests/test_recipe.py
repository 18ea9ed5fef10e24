"""The training recipe (suite/recipe.py): recipe=suite is the model and schedule of before recipes,
bit for bit and under the same config hash; each of recipe=zoology's switches changes what it says
and nothing else; a recipe's runs never share a hash or a board cell with another's."""

from __future__ import annotations

import json
import math
import typing
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from suite import recipe, records
from suite.config import Recipe
from suite.errors import ConfigError
from suite.model import Block, Decoder, MultiHeadAttention, ShortConv, build_model, token_loss
from suite.training import epoch_lr_factor
from tasks.base import IGNORE_LABEL

REPO = Path(__file__).resolve().parent.parent
HYBRID = {"d_model": 16, "num_layers": 2, "num_heads": 1, "d_ff": 32, "dropout": 0.0,
          "mixers": ["conv", "attention"], "position": "none", "mlp": False, "conv_kernel": 3}
LINEAR = {"name": "linear", "impl": "auto", "options": {}}


def with_switch(**switches) -> dict:
    return {**recipe.SUITE, **switches}


def info(num_classes=32):
    return SimpleNamespace(vocab_size=32, seq_len=16, num_classes=num_classes, extra={})


def decoder(model=HYBRID, rec=recipe.SUITE, seed=0) -> Decoder:
    torch.manual_seed(seed)
    return build_model("decoder", info(), model, LINEAR, rec)


def loss_of(model: Decoder) -> float:
    ids = torch.randint(1, 32, (2, 16), generator=torch.Generator().manual_seed(1))
    labels = torch.full((2, 16), IGNORE_LABEL)
    labels[:, 8:] = ids[:, :8]
    return token_loss(*model({"input_ids": ids, "label": labels})).item()


@pytest.mark.parametrize("mlp, loss", [(False, 3.5871338844299316), (True, 3.692305088043213)])
def test_the_suite_recipe_computes_what_the_model_computed_before_recipes(mlp, loss):
    # Pinned from the model of a215aa5 (before recipes), the same seed, batch and sizes.
    assert loss_of(decoder({**HYBRID, "mlp": mlp})) == loss


def test_the_suite_recipe_hashes_as_a_config_without_one(make_config):
    config = make_config("point=cpu_mqar_64x16", "method=linear")
    assert config["recipe"] == recipe.SUITE
    bare = {k: v for k, v in config.items() if k != "recipe"}
    assert records.config_hash(config, "cpu") == records.config_hash(bare, "cpu")
    assert records.cell_key(config) == records.cell_key(bare)
    # and every committed record (written before recipes) keeps its stored hash
    found = sorted((REPO / "results" / "train").rglob("*.json"))[:20]
    assert found
    for path in found:
        record = json.loads(path.read_text())
        assert "recipe" not in record["config"]
        assert records.record_config_hash(record) == record["config_hash"], path


def test_another_recipe_or_a_switch_set_is_another_config_and_another_cell(make_config):
    suite = make_config("point=cpu_mqar_64x16", "method=linear")
    zoology = make_config("point=cpu_mqar_64x16", "method=linear", "recipe=zoology")
    one = make_config("point=cpu_mqar_64x16", "method=linear", "recipe.init=zoology")
    hashes = {records.config_hash(c, "cpu") for c in (suite, zoology, one)}
    cells = {records.cell_key(c) for c in (suite, zoology, one)}
    assert len(hashes) == len(cells) == 3
    assert zoology["recipe"]["name"] == "zoology" and one["recipe"] == with_switch(init="zoology")


def test_the_zoology_recipe_sets_every_switch_to_zoologys_value_but_the_rescale_its_model_skips(make_config):
    config = make_config("point=cpu_mqar_64x16", "method=linear", "recipe=zoology")
    expected = {name: values[1] for name, (values, _) in recipe.SWITCHES.items()}
    assert config["recipe"] == {"name": "zoology", **expected, "out_scale": False}
    # Zoology's trainer neither warms up nor clips; the suite's budget does both.
    assert (config["budget"]["warmup_steps"], config["budget"]["grad_clip"]) == (0, None)
    suite = make_config("point=cpu_mqar_64x16", "method=linear")
    assert suite["budget"]["warmup_steps"] > 0 and suite["budget"]["grad_clip"] is not None


def test_the_schema_declares_the_switches_of_suite_recipe():
    assert list(typing.get_type_hints(Recipe)) == ["name", *recipe.SWITCHES]


def test_zoology_init_draws_linears_and_embeddings_at_0_02_and_zeroes_biases():
    model = decoder(rec=with_switch(init="zoology"))
    plain = decoder()
    for (name, p), (_, q) in zip(model.named_parameters(), plain.named_parameters()):
        if name.endswith("conv.weight") or name.endswith("conv.bias") or "norm" in name:
            assert torch.equal(p, q), name  # convolutions and norms keep PyTorch's draws
    linears = [m for m in model.modules() if isinstance(m, (nn.Linear, nn.Embedding))]
    weights = torch.cat([m.weight.flatten() for m in linears])
    assert abs(weights.std().item() - 0.02) < 0.002
    assert all(not m.bias.any() for m in model.modules() if isinstance(m, nn.Linear) and m.bias is not None)
    assert abs(torch.cat([m.weight.flatten() for m in plain.modules() if isinstance(m, nn.Linear)]).std() - 0.02) > 0.05


def test_out_scale_draws_the_residual_writers_at_0_02_over_sqrt_2_layers():
    model = decoder(model={**HYBRID, "mlp": True, "d_model": 64, "d_ff": 256}, rec=with_switch(out_scale=True))
    target = 0.02 / math.sqrt(2 * HYBRID["num_layers"])
    attention = next(m for m in model.modules() if isinstance(m, MultiHeadAttention))
    writers = [attention.out.weight, *(b.ff[-1].weight for b in model.trunk.blocks)]
    for weight in writers:
        assert abs(weight.std().item() - target) < 0.1 * target
    assert abs(attention.qkv.weight.std().item() - target) > 0.5 * target  # the rest keeps its draw


def test_separate_qkv_is_three_bias_free_maps_and_a_bias_free_output():
    model = decoder(rec=with_switch(qkv="separate"))
    attention = next(m for m in model.modules() if isinstance(m, MultiHeadAttention))
    maps = attention.qkv.maps
    assert [m.out_features for m in maps] == attention.widths and all(m.bias is None for m in maps)
    assert attention.out.bias is None
    x = torch.randn(2, 5, 16)
    torch.testing.assert_close(attention.qkv(x), torch.cat([x @ m.weight.T for m in maps], dim=-1))
    assert loss_of(model) != loss_of(decoder())


def test_passed_residual_adds_the_normed_stream_where_the_mlp_would_be():
    plain = Block("attention", HYBRID, LINEAR)
    passed = Block("attention", HYBRID, LINEAR, recipe=with_switch(residual="passed"))
    passed.load_state_dict(plain.state_dict(), strict=False)  # the same mixer; passed adds norm2
    x = torch.randn(2, 6, 16)
    with torch.no_grad():
        mixed = plain(x, causal=True)
        torch.testing.assert_close(passed(x, causal=True), mixed + passed.norm2(mixed))
    with_mlp = {**HYBRID, "mlp": True}  # with an MLP, Zoology's passing is the pre-norm block itself
    assert isinstance(Block("attention", with_mlp, LINEAR, recipe=with_switch(residual="passed")).ff, nn.Sequential)


def test_embed_dropout_drops_the_embeddings_only():
    model = decoder(rec=with_switch(embed_dropout=0.1))
    assert model.trunk.drop.p == 0.1
    assert all(block.drop.p == HYBRID["dropout"] for block in model.trunk.blocks)
    assert decoder().trunk.drop.p == HYBRID["dropout"]


def test_conv_skip_adds_the_input_in_both_forms():
    torch.manual_seed(0)
    plain = ShortConv(8, 3)
    skip = ShortConv(8, 3, skip=True)
    skip.load_state_dict(plain.state_dict())
    x = torch.randn(2, 7, 8)
    with torch.no_grad():
        torch.testing.assert_close(skip(x), plain(x) + x)
        state, outputs = skip.init_state(2), []
        for t in range(7):
            y, state = skip.step(x[:, t], state)
            outputs.append(y)
        torch.testing.assert_close(torch.stack(outputs, 1), skip(x), atol=1e-6, rtol=1e-6)


def test_tied_head_is_the_embedding_without_bias():
    model = decoder(rec=with_switch(head="tied", init="zoology"))
    assert model.head.weight is model.trunk.embed.weight and model.head.bias is None
    with pytest.raises(ConfigError, match="recipe.head=tied reads the classes as tokens"):
        build_model("decoder", info(num_classes=10), HYBRID, LINEAR, with_switch(head="tied"))


def test_tied_head_is_refused_for_an_encoder():
    with pytest.raises(ConfigError, match="needs task.backbone=decoder"):
        build_model("encoder", info(num_classes=2), {**HYBRID, "mlp": True}, LINEAR, with_switch(head="tied"))


def test_epoch_schedule_is_zoologys_cosine_over_whole_epochs():
    steps_per_epoch, total = 313, 6000  # the state-bound point: 19 whole epochs
    factors = [epoch_lr_factor(s, steps_per_epoch, total) for s in range(total)]
    assert factors[0] == factors[312] == 1.0 and factors[313] < 1.0  # constant within an epoch
    # Zoology's trainer: CosineAnnealingLR(T_max=epochs), stepped at each epoch's end.
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=19, eta_min=0.0)
    for epoch in range(19):
        assert factors[epoch * steps_per_epoch] == pytest.approx(cosine.get_last_lr()[0], abs=1e-12)
        optimizer.step()
        cosine.step()
    assert factors[19 * steps_per_epoch:] == [0.0] * (total - 19 * steps_per_epoch)  # past the last epoch: at rest


def test_the_sites_command_reruns_a_recipe_with_a_switch_set(make_config, tmp_path):
    import dataclasses

    import methods
    from suite.run import with_method_version
    from suite.site.runs import load_runs, reproduce_command
    from tests.test_reproduce import composed

    config = make_config("point=cpu_mqar_64x16", "method=linear", "recipe=zoology", "recipe.init=pytorch")
    config = with_method_version(config, methods.get("linear"))
    committed = next(r for r in load_runs(REPO / "results" / "train" / "mqar" / "linear")[0])
    run = dataclasses.replace(committed, record={**committed.record, "config": config})
    command = reproduce_command(run)
    assert "recipe=zoology" in command and "recipe.init=pytorch" in command
    again = with_method_version(composed(command, tmp_path), methods.get("linear"))
    assert records.config_hash(again, "cpu") == records.config_hash(config, "cpu")


def test_one_switch_names_the_switch_a_recipe_sets_apart_from_the_suites_alone():
    one = {"recipe": {**recipe.SUITE, "init": "zoology"}}
    two = {"recipe": {**recipe.SUITE, "init": "zoology", "qkv": "separate"}}
    assert recipe.label(one) == "suite, init=zoology" and recipe.one_switch(one) == "init=zoology"
    assert recipe.one_switch(two) is None and recipe.label(two) == "suite, init=zoology, qkv=separate"
    assert recipe.one_switch({"recipe": recipe.values("zoology")}) is None  # Zoology's: a recipe of its own
    assert recipe.one_switch({}) is None and recipe.label({}) == "suite"  # a record before recipes
