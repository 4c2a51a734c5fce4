"""Memory a piece of work takes, as the tests that bound it measure it."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def traced_peak(work: Callable[[], T]) -> tuple[T, int]:
    """What ``work()`` returns, and the most memory Python's allocator held during it (the
    compiled core's own allocations are not counted: bound those by what they parse)."""
    tracemalloc.start()
    try:
        result = work()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
