"""Taylor attention (Based, Arora et al. 2024): exp(s) replaced by 1 + s + s^2/2."""

from methods.taylor.module import TaylorAttention

__all__ = ["TaylorAttention"]
