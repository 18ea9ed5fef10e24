"""my-attn: attention methods for attention-suite, found through its entry points (pyproject.toml)."""
