"""Backbones: a Transformer encoder classifier (LRA), its two-tower variant (retrieval) and a causal
decoder (recall), each taking its attention from ``methods.build``."""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import nn

import methods
from suite.errors import ConfigError
from tasks.cache import IGNORE_LABEL

PAD_ID = 0


def check_model_config(model: Mapping, seq_len: int) -> None:
    """One clear line for sizes no model can have."""
    for key in ("d_model", "num_layers", "num_heads", "d_ff"):
        value = model[key]
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ConfigError(f"model.{key} must be a positive integer, got {value!r}")
    if model["d_model"] % model["num_heads"]:
        raise ConfigError(
            f"model.num_heads={model['num_heads']} does not divide model.d_model={model['d_model']}"
        )
    dropout = model["dropout"]
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0.0 <= dropout < 1.0:
        raise ConfigError(f"model.dropout must be a number in [0, 1), got {dropout!r}")
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len <= 0:
        raise ConfigError(f"task.seq_len must be a positive integer, got {seq_len!r}")


class MultiHeadAttention(nn.Module):
    """Projections around one attention method; the method sees (batch, heads, N, head_dim)."""

    def __init__(self, d_model: int, num_heads: int, method: Mapping) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.attention = methods.build(
            method["name"], head_dim=d_model // num_heads, impl=method["impl"], **method["options"]
        )

    def forward(self, x: torch.Tensor, causal: bool) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.num_heads, d // self.num_heads).permute(2, 0, 3, 1, 4)
        o = self.attention(q, k, v, causal=causal)
        return self.out(o.transpose(1, 2).reshape(b, n, d))


class Block(nn.Module):
    """Pre-norm Transformer block."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float, method: Mapping) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, num_heads, method)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, causal: bool) -> torch.Tensor:
        x = x + self.drop(self.attn(self.norm1(x), causal))
        return x + self.drop(self.ff(self.norm2(x)))


class Trunk(nn.Module):
    """Token and learned position embeddings, then the blocks and a final norm."""

    def __init__(self, vocab_size: int, seq_len: int, model: Mapping, method: Mapping) -> None:
        super().__init__()
        d = model["d_model"]
        self.embed = nn.Embedding(vocab_size, d, padding_idx=PAD_ID)
        self.position = nn.Embedding(seq_len, d)
        self.drop = nn.Dropout(model["dropout"])
        self.blocks = nn.ModuleList(
            Block(d, model["num_heads"], model["d_ff"], model["dropout"], method)
            for _ in range(model["num_layers"])
        )
        self.norm = nn.LayerNorm(d)

    def forward(self, ids: torch.Tensor, causal: bool) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.drop(self.embed(ids) + self.position(positions))
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

    def __init__(self, vocab_size: int, seq_len: int, num_classes: int, model: Mapping, method: Mapping) -> None:
        super().__init__()
        self.trunk = Trunk(vocab_size, seq_len, model, method)
        self.head = nn.Linear(model["d_model"], num_classes)

    def forward(self, batch: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        return self.head(self.trunk.pooled(batch["input_ids"])), batch["label"]


class PairClassifier(nn.Module):
    """Two towers with shared weights and LRA's [x1, x2, x1*x2, x1-x2] head (retrieval)."""

    def __init__(self, vocab_size: int, seq_len: int, num_classes: int, model: Mapping, method: Mapping) -> None:
        super().__init__()
        d = model["d_model"]
        self.trunk = Trunk(vocab_size, seq_len, model, method)
        self.head = nn.Sequential(nn.Linear(4 * d, d), nn.GELU(), nn.Linear(d, num_classes))

    def forward(self, batch: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        x1, x2 = self.trunk.pooled(batch["input_ids"]), self.trunk.pooled(batch["input_ids_2"])
        return self.head(torch.cat([x1, x2, x1 * x2, x1 - x2], dim=-1)), batch["label"]


class Decoder(nn.Module):
    """Causal decoder: a prediction at every scored position (recall)."""

    def __init__(self, vocab_size: int, seq_len: int, num_classes: int, model: Mapping, method: Mapping) -> None:
        super().__init__()
        self.trunk = Trunk(vocab_size, seq_len, model, method)
        self.head = nn.Linear(model["d_model"], num_classes)

    def forward(self, batch: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        # The head runs only where a label is scored: recall tasks score a few positions of each
        # sequence, and a vocabulary-sized head at every position would dominate the step's cost.
        hidden, labels = self.trunk(batch["input_ids"], causal=True), batch["label"]
        scored = labels != IGNORE_LABEL
        return self.head(hidden[scored]), labels[scored]


def build_model(backbone: str, info, model: Mapping, method: Mapping) -> nn.Module:
    """The backbone the task asks for, with attention from ``method``."""
    if backbone == "decoder":
        cls = Decoder
    elif backbone == "encoder":
        cls = PairClassifier if info.extra.get("pair") else Classifier
    else:
        raise ConfigError(f"unknown task.backbone {backbone!r}; valid: encoder, decoder")
    return cls(info.vocab_size, info.seq_len, info.num_classes, model, method)


def token_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of a model's predictions (M, C) against their labels (M,)."""
    return F.cross_entropy(logits.float(), labels)
