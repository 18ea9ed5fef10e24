"""Linear attention (Katharopoulos et al. 2020, "Transformers are RNNs"): phi(x) = elu(x) + 1."""

from methods.linear.module import LinearAttention

__all__ = ["LinearAttention"]
