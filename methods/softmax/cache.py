"""The KV cache of softmax decoding: preallocated buffers that grow by doubling.

A step writes its key and value into the next free slot in place, so a step costs one read of the
cache, not a copy of it (``torch.cat`` every step would copy the whole cache, O(N) extra per
token); over N steps the buffers are copied O(log N) times. Consequence of writing in place: a
state is consumed by ``step``; to branch (beam search), copy its tensors first.

The state is a dict: ``k`` (B, H, C, D) and ``v`` (B, H, C, E) with capacity C, and ``length``, a
0-d int64 tensor kept on the CPU (reading it on every step must not wait for the GPU).
"""

from __future__ import annotations

import torch

from methods.base import MethodError


def new_cache(keys: torch.Tensor, values: torch.Tensor, capacity: int | None = None) -> dict[str, torch.Tensor]:
    """A cache holding ``keys`` (B,H,N,D) and ``values`` (B,H,N,E), with room for ``capacity`` tokens
    (default: exactly N, so its bytes are those of the N tokens held)."""
    batch, heads, length, _ = keys.shape
    capacity = length if capacity is None else max(capacity, length)
    k = keys.new_empty(batch, heads, capacity, keys.shape[-1])
    v = values.new_empty(batch, heads, capacity, values.shape[-1])
    k[:, :, :length], v[:, :, :length] = keys, values
    return {"k": k, "v": v, "length": torch.tensor(length, dtype=torch.int64)}


def check_cache(state: object, q_t: torch.Tensor, v_t: torch.Tensor) -> None:
    """One clear error for a state that is not a KV cache fitting q_t (B,H,D) and v_t (B,H,E)."""
    if not isinstance(state, dict) or set(state) != {"k", "v", "length"}:
        keys = sorted(state) if isinstance(state, dict) else type(state).__name__
        raise MethodError(
            f"softmax: step needs the KV cache from softmax.init_state (keys k, v, length), got {keys}"
        )
    batch, heads, dim = q_t.shape
    expected = {"k": (batch, heads, dim), "v": (batch, heads, v_t.shape[-1])}
    for key, shape in expected.items():
        got = state[key].shape
        if got[:2] + got[3:] != shape:
            raise MethodError(
                f"softmax: KV cache {key!r} holds (batch, heads, dim) = {tuple(got[:2] + got[3:])}, "
                f"inputs have {shape}; pass the state from softmax.init_state for these inputs"
            )


def append(state: dict[str, torch.Tensor], k_t: torch.Tensor, v_t: torch.Tensor) -> dict[str, torch.Tensor]:
    """The cache with (k_t, v_t) written at slot ``length``; full buffers are first doubled."""
    k, v, length = state["k"], state["v"], int(state["length"])
    if length == k.shape[2]:
        grown = new_cache(k[:, :, :length], v[:, :, :length], capacity=max(1, 2 * length))
        k, v = grown["k"], grown["v"]
    k[:, :, length] = k_t.to(k.dtype)
    v[:, :, length] = v_t.to(v.dtype)
    return {"k": k, "v": v, "length": torch.tensor(length + 1, dtype=torch.int64)}


def held(state: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """The keys and values the cache holds: views (B,H,length,D) and (B,H,length,E)."""
    length = int(state["length"])
    return state["k"][:, :, :length], state["v"][:, :, :length]
