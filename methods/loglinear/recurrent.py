"""The recurrent (decoding) form: one running (kv, z) sum per occupied Fenwick level.

After T tokens the past splits into the buckets of the binary-counter decomposition of T: one per
set bit b of T, holding level b + 1 for the next query. Adding token T is a binary increment: the
new token starts a level-1 bucket and carries merge it with every occupied level from 1 upwards, so
at most floor(log2 T) + 1 buckets are live. Sums are float32 and, with decay, kept decayed up to the
last token read.

The state is a dict of tensors: ``position`` (0-d int64, tokens read so far), ``sizes`` (int64
(B, H, F, E), what the state was made for) and, per occupied level l, ``kv_level{l}`` (B, H, F, E)
and ``z_level{l}`` (B, H, F).
"""

from __future__ import annotations

import torch

from methods._featuremap.common import DENOMINATOR_EPS, key_sums
from methods.base import MethodError
from methods.loglinear.levels import check_length

_KV, _Z = "kv_level", "z_level"


def init_state(
    batch: int, heads: int, feature_dim: int, value_dim: int, device: torch.device | str | None = None
) -> dict[str, torch.Tensor]:
    """The empty state: no token read, no bucket yet (the steps create them)."""
    return {
        "position": torch.zeros((), dtype=torch.int64, device=device),
        "sizes": torch.tensor([batch, heads, feature_dim, value_dim], dtype=torch.int64, device=device),
    }


def live_states(state: dict[str, torch.Tensor]) -> int:
    """How many Fenwick levels hold a running sum (one (kv, z) pair each)."""
    return len(_levels(state))


def _levels(state: dict[str, torch.Tensor]) -> list[int]:
    return sorted(int(key[len(_KV):]) for key in state if key.startswith(_KV))


def check_state(state: object, phi_q: torch.Tensor, v: torch.Tensor) -> None:
    """One clear error for a state this method did not make or that does not fit the inputs."""
    if not isinstance(state, dict) or not all(isinstance(state.get(key), torch.Tensor) for key in ("position", "sizes")):
        raise MethodError(
            f"loglinear: state must be the dict that init_state/step returned (with 'position' and "
            f"'sizes' tensors), got {type(state).__name__}"
        )
    sizes = (*phi_q.shape, v.shape[-1])
    if tuple(state["sizes"].tolist()) != sizes:
        raise MethodError(
            f"loglinear: state made for (batch, heads, features, value_dim) = {tuple(state['sizes'].tolist())}, "
            f"inputs have {sizes}"
        )
    position = int(state["position"])
    expected = {"position", "sizes"} | {f"{name}{b + 1}" for b in range(position.bit_length()) if position >> b & 1 for name in (_KV, _Z)}
    if set(state) != expected:
        raise MethodError(
            f"loglinear: state keys {sorted(state)} do not match a state after {position} tokens "
            f"(expected {sorted(expected)}); pass the state that init_state/step returned"
        )
    batch, heads, features = phi_q.shape
    for level in _levels(state):
        for key, shape in ((f"{_KV}{level}", (batch, heads, features, v.shape[-1])), (f"{_Z}{level}", (batch, heads, features))):
            if tuple(state[key].shape) != shape:
                raise MethodError(
                    f"loglinear: state[{key!r}] has shape {tuple(state[key].shape)}, inputs need {shape}"
                )


def step_features(
    phi_q: torch.Tensor,
    phi_k: torch.Tensor,
    v: torch.Tensor,
    level_weights: torch.Tensor,
    log_gate: torch.Tensor | None,
    state: dict[str, torch.Tensor],
    num_levels: int,
    eps: float = DENOMINATOR_EPS,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """One step from features phi (B,H,F), v (B,H,E), lambda (B,H,L), log gate (B,H): (o_t float32, new state)."""
    check_state(state, phi_q, v)
    position = int(state["position"])
    check_length(position + 1, num_levels)
    phi_q, phi_k, v, level_weights = phi_q.float(), phi_k.float(), v.float(), level_weights.float()
    decay = None if log_gate is None else torch.exp(log_gate.float())
    buckets = {
        level: (state[f"{_KV}{level}"], state[f"{_Z}{level}"]) for level in _levels(state)
    }
    if decay is not None:
        buckets = {level: (kv * decay[..., None, None], z * decay[..., None]) for level, (kv, z) in buckets.items()}

    self_weight = level_weights[..., 0] * (phi_q * phi_k).sum(-1)
    numerator, denominator = self_weight[..., None] * v, self_weight
    for level, (kv, z) in buckets.items():
        weight = level_weights[..., level]
        numerator = numerator + weight[..., None] * torch.einsum("bhf,bhfe->bhe", phi_q, kv)
        denominator = denominator + weight * (phi_q * z).sum(-1)
    out = numerator / (denominator + eps)[..., None]

    # Binary increment: the new token carries through every occupied level from 1 upwards.
    kv, z, level = phi_k[..., :, None] * v[..., None, :], phi_k, 1
    while level in buckets:
        old_kv, old_z = buckets.pop(level)
        kv, z, level = kv + old_kv, z + old_z, level + 1
    buckets[level] = (kv, z)

    new_state = {"position": state["position"] + 1, "sizes": state["sizes"]}
    for level, (kv, z) in sorted(buckets.items()):
        new_state[f"{_KV}{level}"], new_state[f"{_Z}{level}"] = kv, z
    return out, new_state


def prompt_state(module, k: torch.Tensor, v: torch.Tensor) -> dict[str, torch.Tensor]:
    """The state after the N tokens of k, v, built in parallel: per set bit b of N, highest first, a
    bucket of the next 2^b tokens at level b + 1, decayed up to the last token."""
    batch, heads, n, dim = k.shape
    state = init_state(batch, heads, dim, v.shape[-1], device=k.device)
    state["position"] = torch.full_like(state["position"], n)
    weight = None
    log_gates = module.log_gates(k)
    if log_gates is not None:  # key s is decayed by the gates of every token after it
        cumulative = log_gates.cumsum(-1)
        weight = torch.exp(cumulative[..., -1:] - cumulative)
    start = 0
    for bit in reversed(range(n.bit_length())):
        if n >> bit & 1:
            bucket = slice(start, start + (1 << bit))
            state[f"{_KV}{bit + 1}"], state[f"{_Z}{bit + 1}"] = key_sums(
                lambda x: module.feature_map(x, "key"), k[:, :, bucket], v[:, :, bucket],
                None if weight is None else weight[:, :, bucket])
            start += 1 << bit
    return state
