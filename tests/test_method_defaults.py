"""Each conf/method/<name>.yaml states the method's own defaults (methods declare them in
``method_options``), so the two cannot drift apart as redraw_interval once did (1000 in conf, 0 in
the module). Where conf deliberately runs a method otherwise, the exception is listed with why."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import methods

CONF_DIR = Path(__file__).resolve().parents[1] / "conf" / "method"
# (method, option): why the suite's runs use another value than the method's own default.
DELIBERATE = {
    ("taylor", "feature_dim"): "runs use Based's projection of q and k to 16 dims (273 features); the method's "
                               "own default, no projection, is the kernel mode=fidelity compares with exp",
}


@pytest.mark.parametrize("name", methods.available())
def test_conf_options_are_the_methods_defaults(name):
    conf = yaml.safe_load((CONF_DIR / f"{name}.yaml").read_text())
    assert conf["name"] == name and conf["impl"] == "auto"
    declared = methods.get(name).method_options
    options = conf["options"] or {}
    assert set(options) == set(declared), f"{name}: conf lists {sorted(options)}, the method {sorted(declared)}"
    differ = {key for key in options if options[key] != declared[key]}
    assert differ == {key for (method, key) in DELIBERATE if method == name}, (name, differ)


def test_every_deliberate_difference_is_real():
    for (name, key), why in DELIBERATE.items():
        conf = yaml.safe_load((CONF_DIR / f"{name}.yaml").read_text())["options"]
        assert why and conf[key] != methods.get(name).method_options[key]
