"""API calls per controller, counted from the local cluster's API server audit log.

hack/cluster/audit-policy.yaml records, at Metadata level, only the identities the
bench compares (:data:`JOB_CONTROLLER`, :data:`OPERATOR`, :data:`CEILING`); the log is
``.cluster/logs/audit.log``, rotated by size (``audit-<time>.log`` beside it).
:func:`count_events` is the pure part; :class:`AuditCursor` reads what a round added.
The bench counts each round's calls with it; tests/cluster and tests/chaos read the log
with it too.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

JOB_CONTROLLER = "system:serviceaccount:kube-system:job-controller"
OPERATOR = "system:serviceaccount:paralleljob-system:paralleljob-operator"
CEILING = "system:serviceaccount:paralleljob-bench:ceiling"

# A request is counted once, when its response is complete (watches: when they end).
COUNTED_STAGE = "ResponseComplete"


@dataclass(frozen=True, order=True)
class CallKey:
    """One kind of API call: who made it, the verb and the resource(/subresource)."""

    user: str
    verb: str
    resource: str


def _resource(event: Mapping[str, Any]) -> str:
    ref = event.get("objectRef") or {}
    resource = str(ref.get("resource", "")) or "(non-resource)"
    sub = ref.get("subresource")
    return f"{resource}/{sub}" if sub else resource


def parse_time(text: str) -> datetime:
    """An audit timestamp (RFC 3339, microseconds, ``Z``) as an aware datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def count_events(
    lines: Iterable[str],
    start: datetime,
    end: datetime,
    *,
    users: Iterable[str] | None = None,
    namespace: str | None = None,
) -> Counter[CallKey]:
    """Requests completed in ``[start, end)`` by user, verb and resource.

    ``lines`` are the audit log's JSON lines; only the ResponseComplete stage counts.
    ``users`` limits the count to those users; ``namespace`` to requests on objects in
    that namespace (cluster-wide lists and watches then do not count).
    """
    wanted = set(users) if users is not None else None
    counts: Counter[CallKey] = Counter()
    for line in lines:
        # Cheap text test first: most lines of a long log are other stages or users.
        if COUNTED_STAGE not in line:
            continue
        event = json.loads(line)
        if event.get("stage") != COUNTED_STAGE:
            continue
        user = str((event.get("user") or {}).get("username", ""))
        if wanted is not None and user not in wanted:
            continue
        if namespace is not None and (event.get("objectRef") or {}).get("namespace") != namespace:
            continue
        if not start <= parse_time(event["stageTimestamp"]) < end:
            continue
        counts[CallKey(user, str(event.get("verb", "")), _resource(event))] += 1
    return counts


def by_user(counts: Mapping[CallKey, int], user: str) -> dict[str, int]:
    """One user's counts as ``{"verb resource": n}``, sorted, for reports."""
    return {f"{k.verb} {k.resource}": n for k, n in sorted(counts.items()) if k.user == user}


#: What a late call's key says after its verb and resource.
AFTER_THE_ROUND = "(after the round)"


def late_events(counts: Mapping[CallKey, int], user: str) -> dict[str, int]:
    """``user``'s calls on Events in ``counts`` (counted after a round's window), keyed
    as :func:`by_user` keys them and marked :data:`AFTER_THE_ROUND`. A controller's event
    recorder may post a round's Events long after its jobs finished (client-go's does
    when the controller's QPS holds it back): they are API calls of that round too."""
    return {
        f"{k.verb} {k.resource} {AFTER_THE_ROUND}": n
        for k, n in sorted(counts.items())
        if k.user == user and k.resource == "events"
    }


@dataclass(frozen=True)
class _Position:
    inode: int
    offset: int


class AuditCursor:
    """Reads the audit lines written after a point, across rotations of the log (the
    rotated file keeps its inode under a new name, ``audit-<time>.log``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._start = self._end_of(path)

    @staticmethod
    def _end_of(path: Path) -> _Position:
        try:
            st = path.stat()
        except FileNotFoundError:
            return _Position(0, 0)
        return _Position(st.st_ino, st.st_size)

    def _files_from(self, start: _Position) -> list[tuple[Path, int]]:
        """The files holding what was written since ``start``, oldest first, each with
        the offset to read it from."""
        current = self._end_of(self.path)
        if current.inode == start.inode:
            return [(self.path, start.offset)]
        backups = sorted(
            self.path.parent.glob(f"{self.path.stem}-*{self.path.suffix}"),
            key=lambda p: p.stat().st_mtime,
        )
        files: list[tuple[Path, int]] = []
        for backup in backups:
            if backup.stat().st_ino == start.inode:
                files = [(backup, start.offset)]
            elif files:
                files.append((backup, 0))
        return [*files, (self.path, 0)]

    def _read(self, start: _Position) -> tuple[list[str], _Position]:
        lines: list[str] = []
        end = start
        for path, offset in self._files_from(start):
            with path.open("rb") as f:
                f.seek(offset)
                consumed = offset
                for raw in f:
                    if not raw.endswith(b"\n"):
                        break  # a line still being written: read it next time
                    consumed += len(raw)
                    lines.append(raw.decode(errors="replace"))
                end = _Position(os.fstat(f.fileno()).st_ino, consumed)
        return lines, end

    def lines(self) -> list[str]:
        """Every complete line written since this cursor was made (or last taken)."""
        return self._read(self._start)[0]

    def take(self) -> list[str]:
        """Like :meth:`lines`, and moves the cursor past them."""
        lines, self._start = self._read(self._start)
        return lines
