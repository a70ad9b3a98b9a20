"""The operator under tracemalloc, for the harness's memory mode (not part of the
operator): ``python bench/scale/traced.py OUT.json -- [operator arguments]`` runs what
the ``paralleljob-operator`` console script runs, with allocations traced from the start
(one frame each: where the memory was allocated). The first SIGUSR1 takes a
baseline (before the operator has listed anything); each later one writes to OUT.json
the live memory grown since, by file and line (the top entries, with their source line)
and by package, so that the harness can say which structures hold the bytes per object.

Run as a script, not imported: nothing of the harness is loaded into the operator.
"""

from __future__ import annotations

import sys
from pathlib import Path

# The script's own directory comes first on sys.path; none of its modules may shadow
# a standard one the operator imports.
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    del sys.path[0]

import tracemalloc

tracemalloc.start(1)

import json  # noqa: E402
import linecache  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import sysconfig  # noqa: E402
import time  # noqa: E402
from types import FrameType  # noqa: E402

TOP = 30
_STDLIB = sysconfig.get_paths()["stdlib"]


def package_of(filename: str) -> str:
    """The package a source file belongs to: kopf, aiohttp, paralleljob.runtime, json,
    asyncio... (the first directory below site-packages, the package path for the
    operator's own modules, the module for the standard library)."""
    path = filename.replace(os.sep, "/")
    if "/site-packages/" in path:
        return path.split("/site-packages/", 1)[1].split("/", 1)[0].removesuffix(".py")
    if "/paralleljob/" in path:
        inner = path.rsplit("/paralleljob/", 1)[1]
        parts = inner.split("/")
        return "paralleljob" + ("." + parts[0] if len(parts) > 1 else "")
    if path.startswith(_STDLIB.replace(os.sep, "/")):
        return path[len(_STDLIB) :].strip("/").split("/", 1)[0].removesuffix(".py")
    return path.rsplit("/", 1)[-1]


def _entry(filename: str, lineno: int, size: int, count: int) -> dict[str, object]:
    return {
        "file": filename,
        "line": lineno,
        "package": package_of(filename),
        "source": linecache.getline(filename, lineno).strip(),
        "size": size,
        "count": count,
    }


def _by_package(stats: list[tracemalloc.StatisticDiff]) -> dict[str, dict[str, int]]:
    packages: dict[str, dict[str, int]] = {}
    for stat in stats:
        entry = packages.setdefault(package_of(stat.traceback[0].filename), {"size": 0, "count": 0})
        entry["size"] += stat.size_diff
        entry["count"] += stat.count_diff
    return packages


class Dumper:
    """The first SIGUSR1 keeps a baseline snapshot (the harness sends it before the
    operator has listed anything); each later one writes the live memory grown since
    the baseline, by line and by package."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.baseline: tracemalloc.Snapshot | None = None
        self.sequence = 0

    def snapshot(self) -> tracemalloc.Snapshot:
        return tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, __file__)]
        )

    def dump(self) -> None:
        started = time.monotonic()
        snapshot = self.snapshot()
        self.sequence += 1
        report: dict[str, object] = {
            "sequence": self.sequence,
            "traced_bytes": sum(t.size for t in snapshot.traces),
            "traced_peak_bytes": tracemalloc.get_traced_memory()[1],
        }
        if self.baseline is None:
            self.baseline = snapshot
            report["phase"] = "baseline"
        else:
            diff = snapshot.compare_to(self.baseline, "lineno")
            diff.sort(key=lambda d: d.size_diff, reverse=True)
            report["phase"] = "grown"
            report["grown_bytes"] = sum(d.size_diff for d in diff)
            report["grown_blocks"] = sum(d.count_diff for d in diff)
            report["top"] = [
                _entry(d.traceback[0].filename, d.traceback[0].lineno, d.size_diff, d.count_diff)
                for d in diff[:TOP]
            ]
            report["packages"] = _by_package(diff)
        report["snapshot_seconds"] = round(time.monotonic() - started, 2)
        tmp = self.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(report, indent=1))
        tmp.replace(self.out)  # the harness reads the whole file or none


def main() -> int:
    if len(sys.argv) < 2:
        print("usage: traced.py OUT.json [--] [operator arguments]", file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    args = sys.argv[2:]
    if args[:1] == ["--"]:
        args = args[1:]

    dumper = Dumper(out)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        dumper.dump()

    signal.signal(signal.SIGUSR1, on_signal)
    from paralleljob.cli import main as operator_main

    sys.argv = ["paralleljob-operator", *args]
    return operator_main(args)


if __name__ == "__main__":
    sys.exit(main())
