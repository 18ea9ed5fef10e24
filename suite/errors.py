"""User mistakes the CLI answers with one line and exit code 2, never a traceback."""

from __future__ import annotations

from methods.base import MethodError
from tasks.base import TaskError


class ConfigError(ValueError):
    """An impossible or unknown configuration value."""


USER_ERRORS = (ConfigError, MethodError, TaskError)
