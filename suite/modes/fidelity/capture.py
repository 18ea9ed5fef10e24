"""q, k, v as the attention layers of a trained softmax model see them on a real task.

The model is trained once by the train mode's own loop on the run's task (the mode's ``capture``
overrides written over the task and budget), cached under ``<data_dir>/fidelity/`` keyed by what
defines it, and reloaded with ``torch.load(weights_only=True)`` by later runs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

import torch
from torch import nn

import methods
from suite import recipe, records, training
from suite.errors import ConfigError
from suite.model import Decoder, MultiHeadAttention, build_model
from suite.records import write_atomically

SOFTMAX = {"name": methods.REFERENCE, "impl": "auto", "options": {}}
# What defines the trained model; paths and the mode's own grids do not.
DEFINING_KEYS = ("task", "budget", "model", "method", "seed")


def capture_config(config: Mapping, overrides: Mapping) -> dict:
    """The run's config with softmax attention and the capture overrides of task and budget (checked
    with the run's config: suite.config's Capture)."""
    return {
        **config,
        "method": SOFTMAX,
        "task": {**config["task"], **(overrides.get("task") or {})},
        "budget": {**config["budget"], **(overrides.get("budget") or {})},
    }


def checkpoint_path(cfg: Mapping, device: torch.device) -> Path:
    """``<data_dir>/fidelity/softmax_<task>_<hash>.pt``; the hash covers DEFINING_KEYS and the device
    type (CUDA trains under bf16 autocast, the CPU in float32)."""
    definition = {key: cfg[key] for key in DEFINING_KEYS} | {"device": device.type}
    digest = hashlib.sha256(json.dumps(definition, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return Path(cfg["data_dir"]).expanduser() / "fidelity" / f"softmax_{cfg['task']['name']}_{digest}.pt"


def trained_model(cfg: Mapping, device: torch.device) -> tuple[nn.Module, object, dict]:
    """(model in eval mode, the task's data, facts for the record), training it on first use."""
    data = training.load_data(cfg)
    extra = sorted(set(data.test[0]) - {"input_ids", "label"})
    if extra:  # e.g. retrieval's second tower: whose q, k, v to capture would be unclear
        raise ConfigError(f"mode=fidelity captures one sequence per example; task {cfg['task']['name']!r} also has "
                          f"{', '.join(extra)}: pick a single-sequence task (e.g. task=listops) or set captured: false")
    path = checkpoint_path(cfg, device)
    if path.exists():
        payload = torch.load(path, map_location=device, weights_only=True)
        model = build_model(cfg["task"]["backbone"], data.info, cfg["model"], cfg["method"], recipe.of(cfg)).to(device)
        model.load_state_dict(payload["state_dict"])
        trained_now = False
    else:
        # The capture model is a run of its own config, with its own hash (its checkpoints' folder).
        outcome, model = training.train(cfg, data, device, records.config_hash(cfg, device.type))
        if outcome.status != "ok":
            raise RuntimeError(f"training the softmax model to capture from ended {outcome.status}: {outcome.error}")
        payload = {
            "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
            "test_accuracy": float(outcome.metrics["test_accuracy"]),
            "steps": int(outcome.metrics["steps"]),
        }
        write_atomically(path, lambda tmp: torch.save(payload, tmp))
        trained_now = True
    facts = {"checkpoint": path.name, "trained_now": trained_now, "test_accuracy": payload["test_accuracy"],
             "steps": payload["steps"], "baseline_accuracy": data.baseline, "causal": isinstance(model, Decoder)}
    return model.eval(), data, facts


@torch.no_grad()
def attention_inputs(model: nn.Module, examples: list[torch.Tensor],
                     device: torch.device) -> list[tuple[torch.Tensor, ...]]:
    """Per attention layer, (q, k, v) of shape (examples, heads, L, D), L the shortest example's
    length (longer ones cut to it). Each example runs alone, so no padding enters the capture."""
    layers = [m.attention for m in model.modules() if isinstance(m, MultiHeadAttention)]
    seen: list[list[tuple[torch.Tensor, ...]]] = [[] for _ in layers]

    def keeper(index: int):
        def hook(module, args, kwargs, output):
            seen[index].append(tuple(t.detach().float() for t in args[:3]))
        return hook

    handles = [layer.register_forward_hook(keeper(i), with_kwargs=True) for i, layer in enumerate(layers)]
    try:
        for ids in examples:
            # The trunk alone: the hooks need the attention inputs, not the head's predictions.
            model.trunk(ids.unsqueeze(0).to(device), causal=isinstance(model, Decoder))
    finally:
        for handle in handles:
            handle.remove()
    length = min(len(ids) for ids in examples)
    return [tuple(torch.cat([qkv[i][..., :length, :] for qkv in per_layer]) for i in range(3)) for per_layer in seen]


def longest_examples(split, count: int) -> list[torch.Tensor]:
    """The ``count`` longest input sequences of a split (ties: the earlier first)."""
    ids = [split[i]["input_ids"] for i in range(len(split))]
    order = sorted(range(len(ids)), key=lambda i: (-len(ids[i]), i))
    return [ids[i] for i in order[:count]]
