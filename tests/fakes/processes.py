"""Whether processes are still running, waiting on readiness rather than on time."""

from __future__ import annotations

import os
import threading
from pathlib import Path


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent to reap it counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")


def gone(*pids: int) -> bool:
    """Whether all of them are gone; a SIGKILL is delivered asynchronously, so this waits for it (readiness, not
    timing: 5 s only bounds a failure)."""
    done = threading.Event()
    for _ in range(500):
        if not any(alive(pid) for pid in pids):
            return True
        done.wait(0.01)
    return False
