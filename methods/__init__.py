"""Attention methods behind one contract: ``methods.build(name, head_dim=D, impl=...)``.

Each sub-package ``methods/<name>/`` registers one method class (a subclass of
:class:`methods.base.AttentionMethod`) when it is imported. Sub-packages whose name starts with an
underscore hold shared machinery and register nothing. Adding a method touches nothing here.

A method from outside the repository builds on the public bases exported here
(``from methods import AttentionMethod, FeatureMapAttention``, and ``FeatureMap`` for the block form
of a feature map that the chunked path reads) and is either named by its import
path, ``my_pkg.attn:MyAttention`` (:func:`resolve`), or declared by its installed distribution in
the entry-point group ``attention_suite.methods`` (``name = "my_pkg.attn:MyAttention"``, or a module
that registers its methods when imported): then it is among :func:`available` like a built-in one.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import pkgutil
import types

from methods._featuremap.maps import FeatureMap
from methods._featuremap.module import FeatureMapAttention
from methods.base import AttentionMethod, MethodError
from methods.registry import REGISTRY, register

# The exact method every approximation is compared with (fidelity, kernel crossovers, the capture model).
REFERENCE = "softmax"
# The order users read in tables; methods outside this list follow alphabetically.
CANONICAL_ORDER = ("softmax", "linear", "favor", "taylor", "loglinear")
# Where installed distributions declare their methods (pyproject.toml:
# [project.entry-points."attention_suite.methods"]).
ENTRY_POINTS = "attention_suite.methods"

_discovered = False


def _discover() -> None:
    """Register the built-in methods (the sub-packages) and those of installed distributions (entry points)."""
    global _discovered
    if _discovered:
        return
    for info in pkgutil.iter_modules(__path__):
        if info.ispkg and not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")
    for entry in importlib.metadata.entry_points(group=ENTRY_POINTS):
        load_entry_point(entry)
    _discovered = True


def load_entry_point(entry: importlib.metadata.EntryPoint) -> None:
    """Register what one entry point names: a method class, or a module whose import registers its
    methods; one MethodError naming the distribution and the entry point when it cannot."""
    dist = getattr(entry.dist, "name", None) or "an unnamed distribution"
    where = f"entry point {entry.name} = {entry.value!r} of {dist} (group {ENTRY_POINTS})"
    try:
        loaded = entry.load()
    except Exception as err:  # whatever the outside package raises while importing: said in one line
        raise MethodError(f"cannot load the {where}: {type(err).__name__}: {err}") from err
    if isinstance(loaded, types.ModuleType):
        return  # its import registered its methods
    if not (isinstance(loaded, type) and issubclass(loaded, AttentionMethod)):
        raise MethodError(f"the {where} names {loaded!r}, neither a module nor a subclass of methods.AttentionMethod")
    try:
        register(loaded)
    except MethodError as err:
        raise MethodError(f"the {where}: {err}") from err


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
    return register(cls)  # a MethodError when another class has its name


def build(name: str, head_dim: int, impl: str = "auto", **options) -> AttentionMethod:
    """Instantiate method ``name`` for heads of size ``head_dim`` with implementation ``impl``."""
    return get(name)(head_dim=head_dim, impl=impl, **options)


__all__ = ["REFERENCE", "AttentionMethod", "FeatureMap", "FeatureMapAttention", "MethodError", "available", "build",
           "get", "register", "resolve"]
