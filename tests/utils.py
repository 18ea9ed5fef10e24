"""Helpers shared by the tests."""

from __future__ import annotations

import pytest

from methods.contract import assert_close, rel_error  # noqa: F401 - one definition, the kit's
from suite.config import validate
from suite.errors import ConfigError
from suite.modes import run_schemas


def assert_config_refused(config: dict, group: str, override: dict, says: str) -> None:
    """The schema refuses ``config`` once ``override`` is written over its ``group``, with a message
    matching ``says``."""
    config[group].update(override)
    with pytest.raises(ConfigError, match=says):
        validate(config, run_schemas())
