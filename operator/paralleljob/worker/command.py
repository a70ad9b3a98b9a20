"""Running COMMAND for one item, with a grace period once the worker is asked to stop."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence

from .queue import Item

log = logging.getLogger("paralleljob-worker")

# How often a running command's worker looks whether it was asked to stop.
POLL_SECONDS = 0.2


def run_command(
    command: Sequence[str], item: Item, stopping: Callable[[], bool], grace: float
) -> int | None:
    """Runs ``command`` with the item on stdin and in $PJ_ITEM (its entry id in $PJ_ITEM_ID).

    Returns its exit status (negative: killed by that signal), or None if ``stopping()`` became
    true and the command was still running ``grace`` seconds later, when it was killed.
    Raises OSError if the command cannot be started.
    """
    env = dict(os.environb)
    env[b"PJ_ITEM"] = item.data
    env[b"PJ_ITEM_ID"] = item.id.encode()
    # A process group of its own, so that the kill also reaches what it started (a shell's
    # children), and a Ctrl-C meant for the worker does not interrupt the item.
    with subprocess.Popen(command, stdin=subprocess.PIPE, env=env, start_new_session=True) as proc:
        stdin: bytes | None = item.data
        deadline: float | None = None
        while True:
            try:
                proc.communicate(stdin, timeout=POLL_SECONDS)
                return proc.returncode
            except subprocess.TimeoutExpired:
                stdin = None  # communicate() goes on writing what it was given first
            if stopping():
                if deadline is None:
                    log.info("stopping: COMMAND may finish within the %gs grace period", grace)
                    deadline = time.monotonic() + grace
                if time.monotonic() >= deadline:
                    _kill_group(proc)
                    return None


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    # The group is gone if the command ended on its own just now; its item is redone anyway.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
