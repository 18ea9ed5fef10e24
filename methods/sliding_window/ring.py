"""The decoding state of sliding-window attention: a ring buffer of the last ``window`` keys and values.

Token t sits in slot t mod window, so a step writes one slot in place and reads at most
``window`` keys: O(window) per token, whatever the context. Attention over the held keys is a
softmax over a set, so the ring's order does not matter. Until the ring is full it holds exactly
the tokens seen (it grows by one slot a step, a copy of at most ``window`` slots), so its bytes
are min(n, window) tokens' keys and values. Writing in place means a state is consumed by
``step``; to branch (beam search), copy its tensors first.

The state is a dict: ``keys`` (B, H, S, D), ``values`` (B, H, S, E) with S = min(length, window),
and ``length``, the tokens seen, a 0-d int64 tensor kept on the CPU (a step reads it without
waiting for the GPU).
"""

from __future__ import annotations

import torch

from methods.base import MethodError

PARTS = ("keys", "values", "length")


def new_ring(keys: torch.Tensor, values: torch.Tensor, window: int) -> dict[str, torch.Tensor]:
    """The ring after a context of keys (B,H,N,D) and values (B,H,N,E): its last min(N, window)
    tokens, token t in slot t mod window, in their own dtype."""
    n = keys.shape[2]
    if n <= window:
        return {"keys": keys.clone(memory_format=torch.contiguous_format),
                "values": values.clone(memory_format=torch.contiguous_format),
                "length": torch.tensor(n, dtype=torch.int64)}
    # The tail's i-th token is token n - window + i, whose slot is (i + n) mod window.
    shift = n % window
    return {"keys": torch.roll(keys[:, :, n - window:], shift, dims=2),
            "values": torch.roll(values[:, :, n - window:], shift, dims=2),
            "length": torch.tensor(n, dtype=torch.int64)}


def check_ring(state: object, q_t: torch.Tensor, v_t: torch.Tensor, window: int) -> None:
    """One clear error for a state that is not this window's ring fitting q_t (B,H,D) and v_t (B,H,E)."""
    if not isinstance(state, dict) or set(state) != set(PARTS):
        found = sorted(state) if isinstance(state, dict) else type(state).__name__
        raise MethodError(f"sliding_window: step needs the ring buffer from sliding_window.init_state "
                          f"(keys {', '.join(PARTS)}), got {found}")
    batch, heads, dim = q_t.shape
    for part, want in (("keys", (batch, heads, dim)), ("values", (batch, heads, v_t.shape[-1]))):
        shape = state[part].shape
        if len(shape) != 4 or shape[:2] + shape[3:] != want:
            raise MethodError(f"sliding_window: ring {part!r} holds (batch, heads, dim) = "
                              f"{tuple(shape[:2] + shape[3:])}, inputs have {want}; pass the state from "
                              f"sliding_window.init_state for these inputs")
    slots, length = state["keys"].shape[2], int(state["length"])
    if slots != min(length, window):
        raise MethodError(f"sliding_window: ring holds {slots} slots after {length} tokens, a window of "
                          f"{window} holds {min(length, window)}; pass a state of this module")


def push(state: dict[str, torch.Tensor], k_t: torch.Tensor, v_t: torch.Tensor, window: int) -> dict[str, torch.Tensor]:
    """The ring with token ``length`` (k_t, v_t) written: appended while it is not full, else over
    the oldest token, in place."""
    keys, values, length = state["keys"], state["values"], int(state["length"])
    if length < window:
        keys = torch.cat([keys, k_t.unsqueeze(2).to(keys.dtype)], dim=2)
        values = torch.cat([values, v_t.unsqueeze(2).to(values.dtype)], dim=2)
    else:
        keys[:, :, length % window] = k_t.to(keys.dtype)
        values[:, :, length % window] = v_t.to(values.dtype)
    return {"keys": keys, "values": values, "length": torch.tensor(length + 1, dtype=torch.int64)}
