"""Numbers read from what a peer sent (a Slack payload or metadata, a model's usage, a response header): garbage
-- a word, a list, NaN, an infinity, a 400-digit integer float() overflows on -- reads as none, never raises."""

from __future__ import annotations

import math
from typing import Any


def count(value: Any) -> int:
    """A non-negative count (0 for garbage)."""
    try:
        return max(0, int(value))
    except (TypeError, ValueError, OverflowError):  # int() of an infinity is an OverflowError
        return 0


def number(value: Any) -> float | None:
    """A finite non-negative number (a cost, a ts, a wait); None for garbage."""
    try:
        read = float(value) if not isinstance(value, bool) else -1.0  # None is a TypeError
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int of 400 digits
        return None
    return read if 0 <= read < math.inf else None  # NaN is not
