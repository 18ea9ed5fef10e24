"""FAVOR+ (Performer, Choromanski et al. 2021): unbiased positive random features of softmax's kernel."""

from methods.favor.module import FavorAttention

__all__ = ["FavorAttention"]
