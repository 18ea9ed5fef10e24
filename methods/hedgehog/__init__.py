"""Hedgehog (Zhang et al., ICLR 2024): the learned feature map [softmax(Wx + b), softmax(-(Wx + b))]."""

from methods.hedgehog.module import HedgehogAttention

__all__ = ["HedgehogAttention"]
