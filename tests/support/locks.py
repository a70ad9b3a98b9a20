"""A lock between the processes of one test run (the pytest-xdist workers of
``make test``), for set-up that changes the machine: starting the local cluster,
building and loading an image. One worker does it; the others wait, then find it done."""

from __future__ import annotations

import fcntl
import hashlib
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def machine_lock(name: str) -> Iterator[None]:
    """Holds the lock ``name`` of this checkout (a clone elsewhere has its own cluster)."""
    checkout = hashlib.sha256(str(REPO_ROOT).encode()).hexdigest()[:12]
    path = Path(tempfile.gettempdir()) / f"paralleljob-tests-{checkout}-{name}.lock"
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
