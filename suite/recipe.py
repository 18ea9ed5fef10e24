"""The training recipe (``recipe=``): how the model around a method is initialised, wired and
scheduled. ``recipe=suite`` (the default) is the suite's own model and schedule; ``recipe=zoology``
is Zoology's (Arora et al. 2023, at the commit Based pins), one switch per way the two differ
(DESIGN.md, "The recipe"). A recipe is the ``recipe`` block of the config: its name and its switches,
each of which may also be set on its own (``recipe=zoology recipe.init=pytorch``).

The switches are defined here once: the config schema checks them (suite/config.py), the model and
the schedule read them (suite/model.py, suite/training.py), and the suite's recipe is the value that
hashes as no recipe at all (suite/records.py), so every config written before recipes existed keeps
its hash.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# switch: (its values, the first the suite's and the second Zoology's; what it changes)
SWITCHES: dict[str, tuple[tuple[Any, ...], str]] = {
    "init": (("pytorch", "zoology"),
             "PyTorch's default initialisation, or Zoology's: every linear and embedding weight N(0, 0.02), "
             "biases zero (convolutions and norms keep PyTorch's)"),
    "out_scale": ((False, True),
                  "the attention's output projection (and an MLP's second linear) drawn at std "
                  "0.02 / sqrt(2 x layers), Zoology's rescaled pre-norm residual initialisation "
                  "(which Zoology's recall model does not reach: see RECIPES)"),
    "qkv": (("fused", "separate"),
            "one biased projection making q, k and v, or Based's: q, k, v and the output each a bias-free linear"),
    "residual": (("added", "passed"),
                 "a block without an MLP adds its mixer's output only, or passes its residual on as "
                 "Zoology's does (its identity state mixer: x + norm2(x) goes on to the next block)"),
    "embed_dropout": ((None, 0.1),
                      "dropout on the embeddings: model.dropout (null), or this rate (Zoology's 0.1)"),
    "conv_skip": ((False, True),
                  "the short convolution is proj(x) * conv(x), or Zoology's BaseConv: proj(x) * conv(x) + x"),
    "head": (("separate", "tied"),
             "the output head is its own biased linear, or Zoology's: bias-free, tied to the token embeddings"),
    "schedule": (("step", "epoch"),
                 "the learning rate's cosine is stepped every step after the budget's warm-up, or Zoology's: "
                 "stepped once per epoch over the whole epochs the step budget holds"),
}

# A recipe: its switches' values, and the budget keys it sets (Zoology's trainer neither warms up
# nor clips gradients); a switch or key a recipe does not name keeps the suite's value.
# Zoology's out_scale stays off: its _init_weights rescales the parameters named out_proj or fc2,
# and its recall model (BaseConv's `projection`, Based's `proj_o`) has none; its output
# projections are drawn at 0.02 like every other linear.
RECIPES: dict[str, dict[str, Any]] = {
    "suite": {"recipe": {}},
    "zoology": {"recipe": {"init": "zoology", "qkv": "separate", "residual": "passed", "embed_dropout": 0.1,
                           "conv_skip": True, "head": "tied", "schedule": "epoch"},
                "budget": {"warmup_steps": 0, "grad_clip": None}},
}


def values(name: str) -> dict[str, Any]:
    """The ``recipe`` block of recipe ``name``: its name and every switch's value."""
    block = {switch: choices[0] for switch, (choices, _) in SWITCHES.items()}
    return {"name": name, **block, **RECIPES[name]["recipe"]}


SUITE = values("suite")  # the block that hashes as no block (suite.records.NEUTRAL_VALUES)


def node(name: str) -> dict[str, Any]:
    """Recipe ``name`` as the ``recipe`` group's config (global: it sets budget keys too)."""
    return {**{k: v for k, v in RECIPES[name].items() if k != "recipe"}, "recipe": values(name)}


def of(config: Mapping) -> Mapping[str, Any]:
    """The recipe block of a run's ``config`` (one that predates recipes: the suite's)."""
    return config.get("recipe", SUITE)


def switched(config: Mapping) -> tuple[str, list[str]]:
    """A run's recipe name and each switch set apart from that recipe's own value ('init=zoology');
    a record's unknown name or switch is kept as stated."""
    block = of(config)
    if not isinstance(block, Mapping):
        return str(block), []
    name = str(block.get("name", "suite"))
    own = values(name) if name in RECIPES else {}
    return name, [f"{k}={block[k]}" for k in sorted(block) if k != "name" and own.get(k, object()) != block[k]]


def label(config: Mapping) -> str:
    """A run's recipe as the site names it: its name, then its switches ('zoology', 'suite, init=zoology')."""
    name, changed = switched(config)
    return ", ".join([name, *changed])


def one_switch(config: Mapping) -> str | None:
    """The switch a run's recipe sets apart from the suite's, where it sets one alone ('init=zoology')."""
    name, changed = switched(config)
    return changed[0] if name == "suite" and len(changed) == 1 else None

