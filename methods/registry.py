"""The name -> class table that ``methods.build`` reads. Kept apart to avoid import cycles."""

from __future__ import annotations

REGISTRY: dict[str, type] = {}


def register(cls: type) -> type:
    """Class decorator: make ``cls`` buildable under ``cls.name``."""
    name = cls.name
    if name in REGISTRY and REGISTRY[name] is not cls:
        raise RuntimeError(f"method {name!r} registered twice ({REGISTRY[name]} and {cls})")
    REGISTRY[name] = cls
    return cls
