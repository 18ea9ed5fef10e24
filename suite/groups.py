"""The config groups made from code, stored in Hydra's ConfigStore before a config is composed.

``method=<name>``: every registered method (built in, or from an installed distribution's entry
point) is a choice whose config is its class's, ``{name, impl: auto, options}`` with the options
``method_options`` in their order, ``run_defaults`` applied: a method's defaults are written once,
in its class. ``method=my_pkg.attn:MyAttention`` (an import path) is a choice once ``store_spec``
has imported it. ``task=<name>``: the tasks of outside families (``tasks.configs``); the built-in
tasks are conf/task/*.yaml. ``recipe=<name>``: the recipes of suite/recipe.py (global: a recipe
sets budget keys beside its block). Whatever composes the suite's config (``python -m suite``, Hydra's
compose API in tests and scripts) calls ``store()`` first.
"""

from __future__ import annotations

from typing import Any

import methods
import tasks
from methods.base import AttentionMethod, MethodError
from suite import recipe


def method_config(cls: type[AttentionMethod]) -> dict[str, Any]:
    """The ``method`` group's config of ``cls``: its name, ``impl: auto`` and its options."""
    stray = sorted(set(cls.run_defaults) - set(cls.method_options))
    if stray:
        raise MethodError(f"{cls.name}: run_defaults names option(s) {', '.join(stray)} the method does not take")
    options = {key: cls.run_defaults.get(key, value) for key, value in cls.method_options.items()}
    return {"name": cls.name, "impl": "auto", "options": options}


def store() -> None:
    """Every registered method, every outside family's task and every recipe, as a choice of its group."""
    from hydra.core.config_store import ConfigStore

    configs = ConfigStore.instance()
    for name in methods.available():
        configs.store(group="method", name=name, node=method_config(methods.get(name)))
    for name, node in tasks.configs().items():
        configs.store(group="task", name=name, node=node)
    for name in recipe.RECIPES:
        configs.store(group="recipe", name=name, node=recipe.node(name), package="_global_")


def store_spec(spec: str) -> type[AttentionMethod]:
    """The method named by the import path ``spec`` (``module:Class``), imported, registered and
    stored as the choice ``method=<spec>`` (a MethodError naming the spec when it cannot be)."""
    from hydra.core.config_store import ConfigStore

    cls = methods.resolve(spec)
    ConfigStore.instance().store(group="method", name=spec, node=method_config(cls))
    return cls
