"""The name -> class table that ``methods.build`` reads. Kept apart to avoid import cycles."""

from __future__ import annotations

import re

from methods.base import MethodError

REGISTRY: dict[str, type] = {}
# What a method's name may be: it becomes a folder of results/, a CSS class and a table row. The
# harness's records hold their kind, task and method to the same rule (suite/records.py NAME, which
# a test holds equal: methods/ imports no harness).
NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
NAME_RULE = "a lower-case letter, then lower-case letters, digits and _, at most 64"


def register(cls: type) -> type:
    """Class decorator: make ``cls`` buildable under ``cls.name``, a name of NAME_RULE."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise MethodError(f"method class {qualified(cls) or repr(cls)} has name {name!r}; expected {NAME_RULE}")
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
