"""Sliding-window softmax attention: exact attention over the last ``window`` tokens, a KV cache of
``window`` tokens when decoding."""

from methods.sliding_window.module import SlidingWindowAttention

__all__ = ["SlidingWindowAttention"]
