"""What the site knows of the methods without importing them: the constants the ``methods``
package declares (the order readers see methods in, and the exact method every other is compared
with), read from the source of methods/__init__.py, and what each method class declares of itself
(its normaliser, its paper), read from its class body. The site never imports ``methods`` (it builds
where torch is not installed, from the records alone), so it reads those two literals from the
file; without the file, methods sort by name and no method is taken as the exact one (a record's
``method.time_in_length`` of N^2 still names it, see :func:`is_exact`)."""

from __future__ import annotations

import ast
import importlib.util
from dataclasses import dataclass
from functools import cache
from pathlib import Path

EXACT_TIME = "N^2"  # method.time_in_length of exact attention; any other is sub-quadratic


@cache
def declared() -> dict[str, object]:
    """The literal constants at the top of methods/__init__.py (empty if the package is absent)."""
    spec = importlib.util.find_spec("methods")  # finds the package's file; imports nothing
    origin = Path(spec.origin) if spec and spec.origin else None
    if origin is None or not origin.is_file():
        return {}
    return literal_assignments(ast.parse(origin.read_text()).body)


@cache
def class_constants(method: str) -> dict[str, object]:
    """The literal class attributes of the class registered as ``method`` (``name = "<method>"``)
    in methods/<method>/ (empty if not found): what the method declares, read without importing it."""
    spec = importlib.util.find_spec("methods")
    folder = Path(spec.origin).parent / method if spec and spec.origin else None
    for path in sorted(folder.glob("*.py")) if folder and folder.is_dir() else ():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                found = literal_assignments(node.body)
                if found.get("name") == method:
                    return found
    return {}


def literal_assignments(body: list[ast.stmt]) -> dict[str, object]:
    """The ``NAME = literal`` statements of a module or class body."""
    found = {}
    for node in body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                found[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return found


def denominator_estimates_softmax(method: str) -> bool:
    """Whether the method's normaliser estimates softmax's (methods.base.AttentionMethod's declaration
    of that name; the default, True, where the method does not override it)."""
    return class_constants(method).get("denominator_estimates_softmax", True) is not False


@dataclass(frozen=True)
class Paper:
    """The paper a method comes from, as its class declares it (methods.base.AttentionMethod.paper)."""

    authors: str
    year: int
    title: str
    url: str


def paper(method: str) -> Paper | None:
    """The method's declared paper, if it declares one whole: authors, year, title and an https link
    (the site prints the link into an href: anything else is not taken)."""
    found = class_constants(method).get("paper")
    if not isinstance(found, dict):
        return None
    authors, year, title, url = (found.get(k) for k in ("authors", "year", "title", "url"))
    if not (isinstance(authors, str) and isinstance(title, str) and isinstance(year, int)
            and isinstance(url, str) and url.startswith("https://")):
        return None
    return Paper(authors, year, title, url)


def canonical_order() -> tuple[str, ...]:
    order = declared().get("CANONICAL_ORDER")
    return tuple(order) if isinstance(order, (tuple, list)) else ()


def reference_method() -> str | None:
    """The exact method the others are compared with (methods.REFERENCE), if known."""
    name = declared().get("REFERENCE")
    return name if isinstance(name, str) else None


def method_rank(name: str) -> tuple[int, str]:
    """Sort key: the canonical order's methods first, in that order, then the rest by name."""
    order = canonical_order()
    return (order.index(name) if name in order else len(order), name)


def is_exact(name: str, time_in_length: str | None = None) -> bool:
    """Whether a method is exact attention: its record says its time grows as N^2, or (records
    before ``method.time_in_length``) it is the methods package's reference."""
    if time_in_length is not None:
        return time_in_length == EXACT_TIME
    return name == reference_method()
