"""Shared machinery of the kernelized methods (linear, favor, taylor): attention from features.

Given phi(q), phi(k) the output is o_i = sum_j (phi(q_i).phi(k_j)) v_j / sum_j phi(q_i).phi(k_j),
the kernel smoother with kernel k(q, k) ~ phi(q).phi(k). Each method only supplies its feature map
(maps.py); the paths are shared: naive.py (the quadratic reference), chunk.py (the chunked path,
blocks planned by plan.py, which log-linear attention's core uses too) and triton.py (the kernels),
behind module.py's FeatureMapAttention.
"""
