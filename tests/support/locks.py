"""A lock between the processes of one test run (the pytest-xdist workers of
``make test``), for set-up that changes the machine: starting the local cluster,
building and loading an image. One worker does it; the others wait, then find it done."""

from __future__ import annotations

import fcntl
import hashlib
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def _lock_path(name: str) -> Path:
    checkout = hashlib.sha256(str(REPO_ROOT).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"paralleljob-tests-{checkout}-{name}.lock"


@contextmanager
def machine_lock(name: str) -> Iterator[None]:
    """Holds the lock ``name`` of this checkout (a clone elsewhere has its own cluster)."""
    with _lock_path(name).open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def shared_use(
    name: str, install: Callable[[], bool], remove: Callable[[], None]
) -> Iterator[None]:
    """``name`` installed for as long as any worker of this run uses it: the first user
    installs it (``install`` says whether it did, or found it there before), the last one
    removes what was installed. A module fixture alone is not enough: ``--dist worksteal``
    runs one module's tests on several workers, and one worker's teardown would remove the
    thing under another's running test."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or str(os.getpid())
    state = _lock_path(f"{name}-{run}").with_suffix(".users")
    with machine_lock(name):
        users, ours = _users(state)
        if users == 0:
            ours = install()
        _write_users(state, users + 1, ours)
    try:
        yield
    finally:
        with machine_lock(name):
            users, ours = _users(state)
            if users > 1:
                _write_users(state, users - 1, ours)
            else:
                state.unlink(missing_ok=True)
                if ours:
                    remove()


def _users(state: Path) -> tuple[int, bool]:
    if not state.exists():
        return 0, False
    users, ours = state.read_text().split()
    return int(users), ours == "installed"


def _write_users(state: Path, users: int, ours: bool) -> None:
    state.write_text(f"{users} {'installed' if ours else 'found'}\n")
