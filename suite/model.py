"""Backbones: a Transformer encoder classifier (LRA), its two-tower variant (retrieval) and a causal
decoder (recall), each taking its attention from ``methods.build``.

The trunk's layers follow ``model.mixers``, repeated over ``model.num_layers``: ``attention`` (the
method under test) or ``conv`` (a short causal convolution, Zoology's ``BaseConv``). Zoology and
Based run recall as ``[conv, attention]`` with no position embeddings and no MLP
(``conf/model/hybrid.yaml``); the LRA models are ``[attention]`` with learned positions and an MLP.
How the model is initialised and wired around the method is the recipe's (suite/recipe.py): each
switch below reads ``recipe`` (the run's ``recipe`` block; by default the suite's).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import nn

import methods
from suite.errors import ConfigError
from suite.recipe import SUITE
from tasks.base import IGNORE_LABEL

PAD_ID = 0


class CausalConv(nn.Module):
    """A depthwise causal convolution over the last ``kernel_size`` tokens, (B, N, C) -> (B, N, C):
    position i sees i-k+1..i. Its recurrent form keeps the last ``kernel_size - 1`` inputs."""

    def __init__(self, channels: int, kernel_size: int) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.conv = nn.Conv1d(channels, channels, kernel_size, groups=channels, padding=kernel_size - 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[1]
        return self.conv(x.transpose(1, 2))[..., :n].transpose(1, 2)  # drop the look-ahead outputs

    def init_state(self, batch: int, device: torch.device | None = None,
                   dtype: torch.dtype | None = None) -> torch.Tensor:
        """The decoding state before any token: the last ``kernel_size - 1`` inputs (B, K-1, C),
        oldest first; zeros, as the parallel form's left padding."""
        return torch.zeros(batch, self.kernel_size - 1, self.conv.in_channels, device=device, dtype=dtype)

    def step(self, x_t: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One decoding step: x_t (B, C) -> (y_t (B, C), new state), as ``forward`` at this position."""
        window = torch.cat([state, x_t.unsqueeze(1)], dim=1)  # (B, K, C), oldest first
        # Conv1d is a cross-correlation: weight tap j meets input t - (K-1) + j, i.e. window[:, j].
        return (window * self.conv.weight[:, 0, :].t()).sum(1) + self.conv.bias, window[:, 1:]


class MultiHeadAttention(nn.Module):
    """Projections around one attention method; the method sees q and k of (batch, heads, N,
    ``query_key_dim``) and v of (batch, heads, N, head_dim). One projection of the hidden state
    makes all three, q and k straight at the width the method reads (Based's Taylor map: 16), as
    Based does; most methods read q and k at the head's width. With ``qkv_conv`` (a kernel size),
    q, k and v each pass a short causal convolution and SiLU first, as flash-linear-attention's
    layers do (``use_short_conv``)."""

    def __init__(self, d_model: int, num_heads: int, method: Mapping, qkv_conv: int | None = None,
                 layer: int = 0, separate: bool = False) -> None:
        super().__init__()
        self.num_heads = num_heads
        options = dict(method["options"])
        method_class = methods.get(method["name"])
        if "seed" in method_class.method_options:
            # A method that draws at random (FAVOR+'s projection) draws afresh in each attention
            # layer, as Performer does: the layer's seed is the configured one plus its index.
            options["seed"] = (options.get("seed") or 0) + layer
        head_dim = d_model // num_heads
        self.widths = [num_heads * method_class.query_key_width(head_dim, options)] * 2 + [d_model]  # q, k, v
        # Built in this order (projections, then the method), every parameter's initial draw is
        # what it was before the widths could differ.
        self.qkv = SeparateProjections(d_model, self.widths) if separate else nn.Linear(d_model, sum(self.widths))
        self.qkv_conv = CausalConv(sum(self.widths), qkv_conv) if qkv_conv else None
        self.out = nn.Linear(d_model, d_model, bias=not separate)
        self.attention = methods.build(method["name"], head_dim=head_dim, impl=method["impl"], **options)

    def forward(self, x: torch.Tensor, causal: bool) -> torch.Tensor:
        b, n, d = x.shape
        qkv = self.qkv(x)
        if self.qkv_conv is not None:
            qkv = F.silu(self.qkv_conv(qkv))
        q, k, v = (t.view(b, n, self.num_heads, -1).transpose(1, 2) for t in qkv.split(self.widths, dim=-1))
        o = self.attention(q, k, v, causal=causal)
        return self.out(o.transpose(1, 2).reshape(b, n, d))


class SeparateProjections(nn.Module):
    """q, k and v each from its own bias-free linear map of the hidden state (Based's ``proj_q``,
    ``proj_k``, ``proj_v``), concatenated as one fused projection returns them (recipe.qkv=separate)."""

    def __init__(self, d_model: int, widths: list[int]) -> None:
        super().__init__()
        self.maps = nn.ModuleList(nn.Linear(d_model, width, bias=False) for width in widths)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([m(x) for m in self.maps], dim=-1)


class ShortConv(nn.Module):
    """A gated short convolution (Zoology's ``BaseConv``): ``proj(x) * conv(x)``, the convolution
    depthwise over the last ``kernel_size`` tokens. It gives each position a view of its
    predecessors, which key-value binding in recall needs. Causal always: position i sees i-k+1..i
    (an encoder model is bidirectional only through its attention layers). With ``skip``
    (recipe.conv_skip), the input is added to the product, as Zoology's ``BaseConv`` does."""

    def __init__(self, d_model: int, kernel_size: int, skip: bool = False) -> None:
        super().__init__()
        self.kernel_size, self.skip = kernel_size, skip
        self.conv = CausalConv(d_model, kernel_size)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor, causal: bool = True) -> torch.Tensor:
        y = self.proj(x) * self.conv(x)
        return y + x if self.skip else y

    def init_state(self, batch: int, device: torch.device | None = None,
                   dtype: torch.dtype | None = None) -> torch.Tensor:
        """The decoding state before any token: the convolution's (B, K-1, D)."""
        return self.conv.init_state(batch, device, dtype)

    def step(self, x_t: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One decoding step: x_t (B, D) -> (y_t (B, D), new state); the same output as ``forward``
        at this position of the sequence whose earlier inputs the state holds."""
        mixed, state = self.conv.step(x_t, state)
        y = self.proj(x_t) * mixed
        return (y + x_t if self.skip else y), state


class Block(nn.Module):
    """Pre-norm residual block: a sequence mixer (attention or short convolution), then an MLP
    unless ``mlp`` is off. Without an MLP, recipe.residual=passed puts the identity in its place,
    as Zoology's blocks do (``state_mixer: Identity``): Zoology passes the residual stream on from
    block to block, the MLP's (here: the identity's) output added to it in the next block, which is
    this block's ``x + ff(norm2(x))``; with an MLP the two are the same block."""

    def __init__(self, mixer: str, model: Mapping, method: Mapping, layer: int = 0,
                 recipe: Mapping = SUITE) -> None:
        super().__init__()
        d_model = model["d_model"]
        self.norm1 = nn.LayerNorm(d_model)
        self.mixer = (MultiHeadAttention(d_model, model["num_heads"], method, model.get("qkv_conv"), layer,
                                         separate=recipe["qkv"] == "separate")
                      if mixer == "attention"
                      else ShortConv(d_model, model.get("conv_kernel", 3), skip=recipe["conv_skip"]))
        self.ff = None
        if model.get("mlp", True):
            self.norm2 = nn.LayerNorm(d_model)
            self.ff = nn.Sequential(nn.Linear(d_model, model["d_ff"]), nn.GELU(), nn.Linear(model["d_ff"], d_model))
        elif recipe["residual"] == "passed":
            self.norm2 = nn.LayerNorm(d_model)
            self.ff = nn.Identity()
        self.drop = nn.Dropout(model["dropout"])

    def forward(self, x: torch.Tensor, causal: bool) -> torch.Tensor:
        x = x + self.drop(self.mixer(self.norm1(x), causal))
        return x if self.ff is None else x + self.drop(self.ff(self.norm2(x)))


class Trunk(nn.Module):
    """Token embeddings (plus learned position embeddings unless ``model.position`` is none), then
    the blocks and a final norm."""

    def __init__(self, vocab_size: int, seq_len: int, model: Mapping, method: Mapping,
                 recipe: Mapping = SUITE) -> None:
        super().__init__()
        d = model["d_model"]
        self.embed = nn.Embedding(vocab_size, d, padding_idx=PAD_ID)
        self.position = nn.Embedding(seq_len, d) if model.get("position", "learned") == "learned" else None
        embed_dropout = recipe["embed_dropout"]
        self.drop = nn.Dropout(model["dropout"] if embed_dropout is None else embed_dropout)
        mixers = model.get("mixers", ["attention"])
        kinds = [mixers[i % len(mixers)] for i in range(model["num_layers"])]
        # Each attention layer knows its index among them (a method that draws at random draws per layer).
        self.blocks = nn.ModuleList(
            Block(kind, model, method, layer=kinds[:i].count("attention"), recipe=recipe)
            for i, kind in enumerate(kinds)
        )
        self.norm = nn.LayerNorm(d)

    def forward(self, ids: torch.Tensor, causal: bool) -> torch.Tensor:
        x = self.embed(ids)
        if self.position is not None:
            x = x + self.position(torch.arange(ids.shape[1], device=ids.device))
        x = self.drop(x)
        for block in self.blocks:
            x = block(x, causal)
        return self.norm(x)

    def pooled(self, ids: torch.Tensor) -> torch.Tensor:
        """Mean over real (non-padding) positions of the bidirectional encoding."""
        h = self(ids, causal=False)
        keep = (ids != PAD_ID).unsqueeze(-1).to(h.dtype)
        return (h * keep).sum(1) / keep.sum(1).clamp_min(1.0)


class Classifier(nn.Module):
    """Encoder classifier: one label per sequence (LRA)."""

    def __init__(self, vocab_size: int, seq_len: int, num_classes: int, model: Mapping, method: Mapping,
                 recipe: Mapping = SUITE) -> None:
        super().__init__()
        self.trunk = Trunk(vocab_size, seq_len, model, method, recipe)
        self.head = nn.Linear(model["d_model"], num_classes)

    def forward(self, batch: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        return self.head(self.trunk.pooled(batch["input_ids"])), batch["label"]


class PairClassifier(nn.Module):
    """Two towers with shared weights and LRA's [x1, x2, x1*x2, x1-x2] head (retrieval)."""

    def __init__(self, vocab_size: int, seq_len: int, num_classes: int, model: Mapping, method: Mapping,
                 recipe: Mapping = SUITE) -> None:
        super().__init__()
        d = model["d_model"]
        self.trunk = Trunk(vocab_size, seq_len, model, method, recipe)
        self.head = nn.Sequential(nn.Linear(4 * d, d), nn.GELU(), nn.Linear(d, num_classes))

    def forward(self, batch: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        x1, x2 = self.trunk.pooled(batch["input_ids"]), self.trunk.pooled(batch["input_ids_2"])
        return self.head(torch.cat([x1, x2, x1 * x2, x1 - x2], dim=-1)), batch["label"]


class Decoder(nn.Module):
    """Causal decoder: a prediction at every scored position (recall)."""

    def __init__(self, vocab_size: int, seq_len: int, num_classes: int, model: Mapping, method: Mapping,
                 recipe: Mapping = SUITE) -> None:
        super().__init__()
        self.trunk = Trunk(vocab_size, seq_len, model, method, recipe)
        if recipe["head"] == "tied":  # Zoology's language-model head: the token embeddings, transposed
            if num_classes != vocab_size:
                raise ConfigError(f"recipe.head=tied reads the classes as tokens, but the task has {num_classes} "
                                  f"classes and {vocab_size} tokens; use recipe.head=separate")
            self.head = nn.Linear(model["d_model"], num_classes, bias=False)
            self.head.weight = self.trunk.embed.weight
        else:
            self.head = nn.Linear(model["d_model"], num_classes)

    def forward(self, batch: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        # The head runs only where a label is scored: recall tasks score a few positions of each
        # sequence, and a vocabulary-sized head at every position would dominate the step's cost.
        hidden, labels = self.trunk(batch["input_ids"], causal=True), batch["label"]
        scored = labels != IGNORE_LABEL
        return self.head(hidden[scored]), labels[scored]


def build_model(backbone: str, info, model: Mapping, method: Mapping, recipe: Mapping = SUITE) -> nn.Module:
    """The backbone the task asks for, with attention from ``method``, built and initialised as
    ``recipe`` (a run's ``recipe`` block) says."""
    if backbone == "decoder":
        cls = Decoder
    elif backbone == "encoder":
        if recipe["head"] == "tied":
            raise ConfigError("recipe.head=tied is a language model's head: it needs task.backbone=decoder")
        cls = PairClassifier if info.extra.get("pair") else Classifier
    else:
        raise ConfigError(f"unknown task.backbone {backbone!r}; valid: encoder, decoder")
    built = cls(info.vocab_size, info.seq_len, info.num_classes, model, method, recipe)
    initialise(built, recipe, model["num_layers"])
    return built


ZOOLOGY_STD = 0.02  # Zoology's initializer_range


def initialise(model: nn.Module, recipe: Mapping, num_layers: int) -> None:
    """Draw the weights again where the recipe says (after PyTorch's draws at construction, as
    Zoology's ``_init_weights`` does): recipe.init=zoology, every linear and embedding weight
    N(0, 0.02) and every linear bias zero; recipe.out_scale, the attention's output projection and
    an MLP's second linear (the maps that write into the residual stream) N(0, 0.02 / sqrt(2 x
    layers)). Conv1d and LayerNorm keep PyTorch's."""
    if recipe["init"] == "zoology":
        for module in model.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=ZOOLOGY_STD)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
    if recipe["out_scale"]:
        for module in model.modules():
            writers = ([module.out] if isinstance(module, MultiHeadAttention)
                       else [module.ff[-1]] if isinstance(module, Block) and isinstance(module.ff, nn.Sequential)
                       else [])
            for linear in writers:
                nn.init.normal_(linear.weight, std=ZOOLOGY_STD / math.sqrt(2 * num_layers))


def token_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of a model's predictions (M, C) against their labels (M,)."""
    return F.cross_entropy(logits.float(), labels)


def state_bytes(state: Mapping | tuple) -> int:
    """The bytes of every tensor in a decoding state (a KV cache counts its allocated capacity)."""
    tensors = state.values() if isinstance(state, Mapping) else state
    return sum(t.nbytes for t in tensors)


def recurrent_state_bytes(model: torch.nn.Module, seq_len: int) -> int:
    """Bytes of the decoding state each attention layer holds after a full-length prompt of one
    sequence, summed over layers, as the method itself builds it (``prefill_state``): the
    recurrent state size against which Zoology and Based plot recall (softmax: its KV cache)."""
    total = 0
    for layer in (m for m in model.modules() if isinstance(m, MultiHeadAttention)):
        attention, device = layer.attention, layer.out.weight.device
        with torch.no_grad():
            k, v = (torch.randn(1, layer.num_heads, seq_len, width, device=device)
                    for width in (attention.query_key_dim, attention.head_dim))
            total += state_bytes(layer.attention.prefill_state(k, v))
    return total
