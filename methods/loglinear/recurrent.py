"""The recurrent (decoding) form: one running (kv, z) sum per occupied Fenwick level.

After T tokens the past splits into the buckets of the binary-counter decomposition of T: one per
set bit b of T, holding level b + 1 for the next query. Adding token T is a binary increment: the
new token starts a level-1 bucket and carries merge it with every occupied level from 1 upwards, so
at most floor(log2 T) + 1 buckets are live. Sums are float32 and, with decay, kept decayed up to the
last token read.

Two layouts of the same state:

- levels (``init_state``, ``prompt_state``): a dict of ``position`` (0-d int64, tokens read so
  far), ``sizes`` (int64 (B, H, F, E), what the state was made for), both kept on the CPU so that
  reading them never waits for the GPU, and per occupied level l, ``kv_level{l}`` (B, H, F, E) and
  ``z_level{l}`` (B, H, F). It holds only the live levels (its bytes grow as log T); a step is a
  Python loop over them.
- fixed (``init_fixed_state``, ``to_fixed``): ``position`` (0-d int64 on the device), ``kv``
  (B, H, S, F, E) and ``z`` (B, H, S, F), one slot per level 1..S for up to 2^S - 1 tokens, empty
  slots exactly zero. ``fixed_step`` is one fixed sequence of device operations whatever the
  position (no host read, no loop of data-dependent length), so it can be captured in a CUDA graph
  and replayed token after token.
"""

from __future__ import annotations

import torch

from methods._featuremap.common import DENOMINATOR_EPS, key_sums
from methods.base import MethodError
from methods.loglinear.inputs import LogLinearInputs
from methods.loglinear.levels import check_length

_KV, _Z = "kv_level", "z_level"


def init_state(
    batch: int, heads: int, feature_dim: int, value_dim: int, device: torch.device | str | None = None
) -> dict[str, torch.Tensor]:
    """The empty state: no token read, no bucket yet (the steps create them)."""
    return {
        "position": torch.zeros((), dtype=torch.int64),
        "sizes": torch.tensor([batch, heads, feature_dim, value_dim], dtype=torch.int64),
    }


def live_states(state: dict[str, torch.Tensor]) -> int:
    """How many Fenwick levels hold a running sum (one (kv, z) pair each)."""
    return len(_levels(state))


def _levels(state: dict[str, torch.Tensor]) -> list[int]:
    return sorted(int(key[len(_KV):]) for key in state if key.startswith(_KV))


def check_state(state: object, phi_q: torch.Tensor, v: torch.Tensor) -> None:
    """One clear error for a state this method did not make or that does not fit the inputs."""
    if not isinstance(state, dict) or not all(isinstance(state.get(key), torch.Tensor)
                                              for key in ("position", "sizes")):
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
    expected = {"position", "sizes"} | {f"{name}{b + 1}" for b in range(position.bit_length()) if position >> b & 1
                                        for name in (_KV, _Z)}
    if set(state) != expected:
        raise MethodError(
            f"loglinear: state keys {sorted(state)} do not match a state after {position} tokens "
            f"(expected {sorted(expected)}); pass the state that init_state/step returned"
        )
    batch, heads, features = phi_q.shape
    for level in _levels(state):
        for key, shape in ((f"{_KV}{level}", (batch, heads, features, v.shape[-1])),
                           (f"{_Z}{level}", (batch, heads, features))):
            if tuple(state[key].shape) != shape:
                raise MethodError(
                    f"loglinear: state[{key!r}] has shape {tuple(state[key].shape)}, inputs need {shape}"
                )


def step_features(token: LogLinearInputs, state: dict[str, torch.Tensor], num_levels: int,
                  eps: float = DENOMINATOR_EPS) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """One step from one token's inputs, phi (B,H,F), v (B,H,E), lambda (B,H,L), log gate (B,H):
    (o_t float32, new state)."""
    check_state(state, token.phi_q, token.v)
    position = int(state["position"])
    check_length(position + 1, num_levels)
    phi_q, phi_k, v, level_weights, log_gate = token.float()
    decay = None if log_gate is None else torch.exp(log_gate)
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

    new_state = {"position": torch.tensor(position + 1, dtype=torch.int64), "sizes": state["sizes"]}
    for level, (kv, z) in sorted(buckets.items()):
        new_state[f"{_KV}{level}"], new_state[f"{_Z}{level}"] = kv, z
    return out, new_state


def prompt_state(module, k: torch.Tensor, v: torch.Tensor) -> dict[str, torch.Tensor]:
    """The state after the N tokens of k, v, built in parallel: per set bit b of N, highest first, a
    bucket of the next 2^b tokens at level b + 1, decayed up to the last token."""
    batch, heads, n, dim = k.shape
    state = init_state(batch, heads, dim, v.shape[-1], device=k.device)
    state["position"] = torch.tensor(n, dtype=torch.int64)
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


# -- the fixed layout: every level preallocated, a step without host syncs ------------------------
FIXED_KEYS = {"position", "kv", "z"}


def fixed_slots(max_length: int) -> int:
    """Slots (levels 1..S) a state needs to read ``max_length`` tokens: S = bit_length(max_length)."""
    return max(1, max_length.bit_length())


def init_fixed_state(batch: int, heads: int, feature_dim: int, value_dim: int, max_length: int,
                     device: torch.device | str | None = None) -> dict[str, torch.Tensor]:
    """The empty fixed-layout state for up to ``max_length`` tokens."""
    slots = fixed_slots(max_length)
    return {
        "position": torch.zeros((), dtype=torch.int64, device=device),
        "kv": torch.zeros(batch, heads, slots, feature_dim, value_dim, device=device),
        "z": torch.zeros(batch, heads, slots, feature_dim, device=device),
    }


def to_fixed(state: dict[str, torch.Tensor], max_length: int,
             device: torch.device | str | None = None) -> dict[str, torch.Tensor]:
    """The fixed layout of a levels-layout ``state`` (e.g. from ``prompt_state``), for up to ``max_length`` tokens."""
    batch, heads, features, value_dim = (int(x) for x in state["sizes"])
    position = int(state["position"])
    if position > max_length:
        raise MethodError(f"loglinear: a state after {position} tokens does not fit max_length={max_length}")
    fixed = init_fixed_state(batch, heads, features, value_dim, max_length, device=device)
    fixed["position"].fill_(position)
    for level in _levels(state):
        fixed["kv"][:, :, level - 1] = state[f"{_KV}{level}"]
        fixed["z"][:, :, level - 1] = state[f"{_Z}{level}"]
    return fixed


def is_fixed(state: object) -> bool:
    return isinstance(state, dict) and set(state) == FIXED_KEYS


def check_fixed_state(state: dict[str, torch.Tensor], phi_q: torch.Tensor, v: torch.Tensor, num_levels: int) -> None:
    """Shape checks only (they read no tensor value, so they cost no device sync)."""
    batch, heads, features = phi_q.shape
    slots = state["kv"].shape[2] if state["kv"].dim() == 5 else -1
    expected = {"position": (), "kv": (batch, heads, slots, features, v.shape[-1]),
                "z": (batch, heads, slots, features)}
    got = {key: tuple(state[key].shape) for key in FIXED_KEYS}
    if got != expected:
        raise MethodError(f"loglinear: fixed state shapes {got} do not fit the inputs (expected {expected})")
    if slots + 1 > num_levels:
        raise MethodError(
            f"loglinear: a fixed state of {slots} slots needs {slots + 1} levels, num_levels={num_levels}"
        )


def fixed_step(token: LogLinearInputs, state: dict[str, torch.Tensor],
               eps: float = DENOMINATOR_EPS) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """``step_features`` on the fixed layout, the same result: every slot is read (empty ones are
    zero and add nothing), and the binary increment is done with masks from the position's bits."""
    kv, z, position = state["kv"], state["z"], state["position"]
    slots = kv.shape[2]
    # Past the slots the carry would have nowhere to go; checked on the device, not read back.
    torch._assert_async(position < (1 << slots) - 1, "loglinear: fixed state full; raise max_length")
    phi_q, phi_k, v, level_weights, log_gate = token.float()
    if log_gate is not None:
        decay = torch.exp(log_gate)
        kv, z = kv * decay[..., None, None, None], z * decay[..., None, None]
    slot_weights = level_weights[..., 1 : slots + 1]  # slot b holds level b + 1
    self_weight = level_weights[..., 0] * (phi_q * phi_k).sum(-1)
    numerator = self_weight[..., None] * v + torch.einsum("bhs,bhf,bhsfe->bhe", slot_weights, phi_q, kv)
    denominator = self_weight + torch.einsum("bhs,bhf,bhsf->bh", slot_weights, phi_q, z)
    out = numerator / (denominator + eps)[..., None]

    # Adding token p: the trailing set bits of p (slots below t) merge with it into slot t.
    bits = torch.arange(slots, device=position.device)
    merged_slots = ((position ^ (position + 1)) >> (bits + 1)) & 1 == 1  # slots b < t
    target = ((position + 1) & ~position) >> bits & 1 == 1  # slot t
    keep = merged_slots.to(kv.dtype)
    new_kv = phi_k[..., :, None] * v[..., None, :] + torch.einsum("s,bhsfe->bhfe", keep, kv)
    new_z = phi_k + torch.einsum("s,bhsf->bhf", keep, z)
    kv = torch.where(target[:, None, None], new_kv.unsqueeze(2), torch.where(merged_slots[:, None, None], 0.0, kv))
    z = torch.where(target[:, None], new_z.unsqueeze(2), torch.where(merged_slots[:, None], 0.0, z))
    return out, {"position": position + 1, "kv": kv, "z": z}
