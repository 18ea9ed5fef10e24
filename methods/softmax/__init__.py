"""Exact softmax attention: the baseline every other method is measured against."""

from methods.softmax.module import SoftmaxAttention

__all__ = ["SoftmaxAttention"]
