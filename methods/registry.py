"""The name -> class table that ``methods.build`` reads. Kept apart to avoid import cycles."""

from __future__ import annotations

from methods.base import MethodError

REGISTRY: dict[str, type] = {}


def register(cls: type) -> type:
    """Class decorator: make ``cls`` buildable under ``cls.name``."""
    name = cls.name
    if name in REGISTRY and REGISTRY[name] is not cls:
        raise MethodError(f"method {name!r} registered twice: {qualified(REGISTRY[name]) or repr(REGISTRY[name])} "
                          f"and {qualified(cls) or repr(cls)}")
    REGISTRY[name] = cls
    return cls


def qualified(cls: type) -> str | None:
    """``cls`` as the import path that names it: ``module:Class`` (what ``method=`` takes); None for
    a class no import path reaches (one defined inside a function)."""
    if "<locals>" in cls.__qualname__:
        return None
    return f"{cls.__module__}:{cls.__qualname__}"
