"""Log-linear attention (Guo, Yang et al. 2025): a kernel smoother whose weights scale per Fenwick level."""

from methods.loglinear.levels import level_matrix

__all__ = ["level_matrix"]
