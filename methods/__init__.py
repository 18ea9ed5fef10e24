"""Attention methods behind one contract: ``methods.build(name, head_dim=D, impl=...)``.

Each sub-package ``methods/<name>/`` registers one method class (a subclass of
:class:`methods.base.AttentionMethod`) when it is imported. Sub-packages whose name starts with an
underscore hold shared machinery and register nothing. Adding a method touches nothing here.

A method from outside the repository builds on the public bases exported here
(``from methods import AttentionMethod, FeatureMapAttention``) and is named by its import path,
``my_pkg.attn:MyAttention`` (:func:`resolve`).
"""

from __future__ import annotations

import importlib
import pkgutil

from methods._featuremap.module import FeatureMapAttention
from methods.base import AttentionMethod, MethodError
from methods.registry import REGISTRY, register

# The exact method every approximation is compared with (fidelity, kernel crossovers, the capture model).
REFERENCE = "softmax"
# The order users read in tables; methods outside this list follow alphabetically.
CANONICAL_ORDER = ("softmax", "linear", "favor", "taylor", "loglinear")

_discovered = False


def _discover() -> None:
    global _discovered
    if _discovered:
        return
    for info in pkgutil.iter_modules(__path__):
        if info.ispkg and not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")
    _discovered = True


def available() -> tuple[str, ...]:
    """The registered method names, in canonical order."""
    _discover()
    rank = {name: i for i, name in enumerate(CANONICAL_ORDER)}
    return tuple(sorted(REGISTRY, key=lambda n: (rank.get(n, len(rank)), n)))


def get(name: str) -> type[AttentionMethod]:
    """The class registered under ``name``; a clear error listing the valid names otherwise."""
    _discover()
    if name not in REGISTRY:
        raise MethodError(f"unknown method {name!r}; valid methods: {', '.join(available())}")
    return REGISTRY[name]


def resolve(spec: str) -> type[AttentionMethod]:
    """The method class named by ``spec``: a registered name, or an import path ``module:Class``.

    A class named by its path is registered under its ``name`` (so records, sweeps and the site
    name it as they name a built-in one); a path that names no AttentionMethod is refused.
    """
    if ":" not in spec:
        return get(spec)
    module_name, _, attr = spec.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as err:
        raise MethodError(f"cannot import method {spec!r} (expected 'module:Class'): {err}") from err
    if not (isinstance(cls, type) and issubclass(cls, AttentionMethod)):
        raise MethodError(f"{spec!r} is {cls!r}, not a subclass of methods.AttentionMethod")
    _discover()
    return register(cls)


def build(name: str, head_dim: int, impl: str = "auto", **options) -> AttentionMethod:
    """Instantiate method ``name`` for heads of size ``head_dim`` with implementation ``impl``."""
    return get(name)(head_dim=head_dim, impl=impl, **options)


__all__ = ["REFERENCE", "AttentionMethod", "FeatureMapAttention", "MethodError", "available", "build", "get",
           "register", "resolve"]
