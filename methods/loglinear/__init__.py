"""Log-linear attention (Guo, Yang et al. 2025): a kernel smoother whose weights scale per Fenwick level."""

from methods.loglinear.levels import level_matrix
from methods.loglinear.module import LogLinearAttention

__all__ = ["LogLinearAttention", "level_matrix"]
