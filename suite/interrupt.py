"""Stopping a process by SIGTERM (a cluster's pre-emption, ``kill``) the way Ctrl-C stops it, so that
what it was doing cleans up (a run records itself as interrupted, a site build removes its half)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within ``with``, SIGTERM raises KeyboardInterrupt."""
    def handler(signum, frame):
        raise KeyboardInterrupt
    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
