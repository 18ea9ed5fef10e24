"""The backbone options of conf/model: the gated short convolution (causal, and its recurrent form
equal to its parallel one), the hybrid recall backbone, and the checks on the model options."""

from __future__ import annotations

import pytest
import torch

from suite.config import validate
from suite.model import CausalConv, Decoder, MultiHeadAttention, ShortConv
from suite.modes import run_schemas
from tests.utils import assert_config_refused


def test_short_conv_is_causal():
    torch.manual_seed(0)
    conv = ShortConv(d_model=8, kernel_size=3)
    x = torch.randn(2, 10, 8)
    t = 5
    moved = x.clone()
    moved[:, t] += 1.0
    with torch.no_grad():
        before, after = conv(x), conv(moved)
    assert torch.equal(before[:, :t], after[:, :t])  # bit-identical: nothing before t sees token t
    assert not torch.allclose(before[:, t], after[:, t])
    # Token t is in the window of t+1 and t+2 (kernel 3), but not of t+3.
    assert not torch.allclose(before[:, t + 2], after[:, t + 2])
    assert torch.equal(before[:, t + 3:], after[:, t + 3:])


@pytest.mark.parametrize("kernel_size", [1, 3, 4])
def test_short_conv_step_by_step_equals_parallel_form(kernel_size):
    torch.manual_seed(kernel_size)
    conv = ShortConv(d_model=16, kernel_size=kernel_size)
    x = torch.randn(2, 12, 16)
    state = conv.init_state(2, x.device, x.dtype)
    assert state.shape == (2, kernel_size - 1, 16) and not state.any()
    with torch.no_grad():
        parallel = conv(x)
        outputs = []
        for t in range(x.shape[1]):
            y_t, state = conv.step(x[:, t], state)
            outputs.append(y_t)
    assert state.shape == (2, kernel_size - 1, 16)
    torch.testing.assert_close(torch.stack(outputs, dim=1), parallel, atol=1e-6, rtol=1e-6)
    # The state is the last kernel_size - 1 inputs, oldest first.
    assert torch.equal(state, x[:, x.shape[1] - (kernel_size - 1):])


def test_hybrid_decoder_alternates_conv_and_attention_without_positions_or_mlp(make_config):
    config = make_config("model=hybrid", "task=mqar", "method=linear", "model.num_layers=4")
    model = Decoder(vocab_size=20, seq_len=64, num_classes=20, model=config["model"], method=config["method"])
    trunk = model.trunk
    assert trunk.position is None
    assert all(block.ff is None for block in trunk.blocks)
    kinds = [type(block.mixer) for block in trunk.blocks]
    assert kinds == [ShortConv, MultiHeadAttention, ShortConv, MultiHeadAttention]
    assert trunk.blocks[0].mixer.kernel_size == config["model"]["conv_kernel"] == 3
    # Without position embeddings the model still runs, and the convolution keeps it causal.
    ids = torch.randint(1, 20, (2, 16))
    labels = torch.full((2, 16), 3)
    logits, scored = model({"input_ids": ids, "label": labels})
    assert logits.shape == (32, 20) and scored.shape == (32,)


def test_default_model_has_positions_and_mlp(make_config):
    config = make_config("task=mqar", "method=linear")  # budget smoke: model smoke
    model = Decoder(vocab_size=20, seq_len=64, num_classes=20, model=config["model"], method=config["method"])
    assert model.trunk.position is not None
    assert all(block.ff is not None and isinstance(block.mixer, MultiHeadAttention) for block in model.trunk.blocks)


@pytest.mark.parametrize("override, says", [
    ({"mixers": ["attention", "mamba"]}, "model.mixers must be a non-empty list"),
    ({"mixers": []}, "model.mixers must be a non-empty list"),
    ({"mixers": ["conv"]}, "has no attention layer"),
    ({"position": "rotary"}, "model.position must be one of learned, none"),
    ({"mlp": "yes"}, "model.mlp must be true or false"),
    ({"mlp": 1}, "model.mlp must be true or false"),
    ({"conv_kernel": 0}, "model.conv_kernel must be a positive integer"),
    ({"conv_kernel": True}, "model.conv_kernel must be a positive integer"),
    ({"qkv_conv": 0}, "model.qkv_conv must be a positive integer"),
    ({"qkv_conv": "3"}, "model.qkv_conv must be a positive integer"),
])
def test_bad_model_options_are_refused(make_config, override, says):
    assert_config_refused(make_config("model=hybrid"), "model", override, says)


def test_shipped_model_configs_pass_the_check(make_config):
    for name in ("hybrid", "shortconv", "smoke", "small", "paper"):
        validate(make_config(f"model={name}"), run_schemas())  # raises if refused


@pytest.mark.parametrize("method", ["softmax", "linear", "taylor"])
def test_shortconv_decoder_is_causal_with_its_conv_on_q_k_v(make_config, method):
    """fla's layout (model=shortconv): each attention layer convolves q, k and v over the last
    tokens; a later token must still never change an earlier output."""
    torch.manual_seed(0)
    config = make_config("model=shortconv", "task=mqar", f"method={method}")
    trunk = Decoder(vocab_size=20, seq_len=16, num_classes=20, model=config["model"], method=config["method"]).trunk
    assert trunk.position is None
    assert all(isinstance(b.mixer, MultiHeadAttention) and b.mixer.qkv_conv is not None for b in trunk.blocks)
    assert trunk.blocks[0].mixer.qkv_conv.kernel_size == 3
    ids = torch.randint(1, 20, (2, 16))
    moved = ids.clone()
    t = 9
    moved[:, t] = (ids[:, t] % 19) + 1
    with torch.no_grad():
        before, after = trunk(ids, causal=True), trunk(moved, causal=True)
    torch.testing.assert_close(before[:, :t], after[:, :t], atol=1e-6, rtol=1e-6)
    assert not torch.allclose(before[:, t], after[:, t])


def test_causal_conv_of_qkv_step_by_step_equals_parallel_form():
    torch.manual_seed(1)
    conv = CausalConv(channels=12, kernel_size=3)
    x = torch.randn(2, 9, 12)
    state = conv.init_state(2)
    with torch.no_grad():
        steps = []
        for i in range(x.shape[1]):
            y, state = conv.step(x[:, i], state)
            steps.append(y)
        torch.testing.assert_close(torch.stack(steps, 1), conv(x), atol=1e-6, rtol=1e-6)


def test_each_favor_layer_draws_its_own_projection_and_one_layer_keeps_the_seed(make_config):
    import methods

    config = make_config("task=mqar", "method=favor", "model.num_layers=2")
    trunk = Decoder(vocab_size=20, seq_len=16, num_classes=20, model=config["model"], method=config["method"]).trunk
    first, second = (block.mixer.attention for block in trunk.blocks)
    assert not torch.equal(first.projection, second.projection)  # Performer: one draw per layer
    alone = methods.build("favor", head_dim=first.head_dim, **config["method"]["options"])
    assert torch.equal(first.projection, alone.projection)  # the first layer draws with the configured seed
