"""``python -m bench.scale``: the operator against the stub API at 600, 6,000 and 60,000
objects (BENCH_QUICK=1 or --quick: 600 only), results in bench/results/."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import shlex
import sys
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..environment import git_commit, machine
from ..runner import REPO_ROOT
from . import report
from .run import Level, Options, run_level

FULL_JOBS = (100, 1000, 10000)
QUICK_JOBS = (100,)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__)
    add = parser.add_argument
    add("--label", default="run", help="names the results: <date>-scale-harness-<label>.md")
    add(
        "--quick",
        action="store_true",
        default=os.environ.get("BENCH_QUICK", "") not in ("", "0"),
        help="the smallest level only, a short rest (also BENCH_QUICK=1)",
    )
    add("--jobs", help="comma list of levels in jobs (default 100,1000,10000)")
    add("--pods-per-job", type=int, default=5)
    add(
        "--batch-percent",
        type=int,
        default=0,
        help="share of the jobs that are batch/v1 Jobs (default 0)",
    )
    add(
        "--memory",
        choices=("on", "off", "only"),
        default="on",
        help="also run each level under tracemalloc for bytes per object (default on)",
    )
    add(
        "--memory-max-jobs",
        type=int,
        default=1000,
        help="the largest level run under tracemalloc (default 1000 jobs)",
    )
    add("--sync-timeout", type=float, default=1200.0, help="seconds to wait for every job synced")
    add(
        "--traced-sync-timeout",
        type=float,
        default=2400.0,
        help="the same in memory mode, which tracing slows down (default 2400)",
    )
    add("--settle", type=float, help="seconds at rest before the probes (default 10; quick 3)")
    add("--probes", type=int, default=50)
    add("--probe-rate", type=float, default=20.0, help="probe jobs created per second")
    add("--leader-elect", action="store_true", help="run the operator with leader election")
    add(
        "--failover",
        action="store_true",
        help="stand the operator by while another holder has the Lease, then release it "
        "and time the takeover (implies --leader-elect)",
    )
    add(
        "--grow",
        type=int,
        default=0,
        help="after the probes, create this many more jobs, whose pods the stub runs: a "
        "running operator's growth (default 0: none)",
    )
    add("--grow-rate", type=float, default=50.0, help="growth jobs created per second")
    add(
        "--grow-complete-after",
        type=float,
        help="the grown jobs' pods exit 0 this many seconds after they run; the growth "
        "waits for every grown job Complete and reports CPU per pod lifecycle and per event",
    )
    add(
        "--current-status",
        action="store_true",
        help="seed statuses that lack nothing (as a leader leaves them): every job synced "
        "is then the operator's metrics' word (every job synced once, none pending), not "
        "every job's status written once",
    )
    add("--note", default="", help="a paragraph for the results' notes")
    add("--out", type=Path, default=REPO_ROOT / "bench" / "results")
    add("--logs", type=Path, help="where the operator logs go (default: a temporary directory)")
    return parser.parse_args(argv)


def plan(args: argparse.Namespace) -> list[tuple[Level, bool]]:
    """The runs, (level, traced), in order: each level plain, then traced."""
    default = QUICK_JOBS if args.quick else FULL_JOBS
    jobs = [int(j) for j in args.jobs.split(",")] if args.jobs else list(default)
    runs = []
    for n in jobs:
        level = Level(n, args.pods_per_job, args.batch_percent)
        if args.memory != "only":
            runs.append((level, False))
        if args.memory != "off" and n <= args.memory_max_jobs:
            runs.append((level, True))
    return runs


async def run_all(args: argparse.Namespace, logs: Path) -> list[dict[str, Any]]:
    settle = args.settle if args.settle is not None else (3.0 if args.quick else 10.0)
    results = []
    for level, traced in plan(args):
        options = Options(
            settle_seconds=settle,
            probes=args.probes,
            probe_rate=args.probe_rate,
            sync_timeout=args.traced_sync_timeout if traced else args.sync_timeout,
            leader_elect=args.leader_elect or args.failover,
            failover=args.failover and not traced,
            traced=traced,
            logs=logs,
            grow=0 if traced else args.grow,
            grow_rate=args.grow_rate,
            complete_after=args.grow_complete_after,
            current_status=args.current_status,
        )
        mode = "traced" if traced else "plain"
        print(f"scale: {level.objects:,} objects ({level.jobs:,} jobs), {mode}", flush=True)
        result = await run_level(level, options)
        print(f"scale:   {summary_line(result)}", flush=True)
        results.append(result)
    return results


def summary_line(r: dict[str, Any]) -> str:
    if r.get("error"):
        return str(r["error"])
    probes = (r.get("probes") or {}).get("first_pod_after_watch") or {}
    grown = r.get("growth") or {}
    return (
        f"synced {r.get('jobs_synced')} of {r['level']['jobs']} in {r.get('wall_synced_s')} s, "
        f"CPU {r.get('cpu_synced_s') or r.get('cpu_at_timeout_s')} s, "
        f"RSS peak {r.get('rss_peak_mib')} MiB, "
        f"at rest {r.get('rss_steady_mib')} MiB, first pod p50 {probes.get('p50_ms')} ms"
        + (f", growth: longest pauses {grown.get('longest_ms')} ms" if grown else "")
        + (
            f", CPU per pod lifecycle {grown['cpu_ms_per_pod']} ms, per event "
            f"{grown['cpu_ms_per_event']} ms"
            if "cpu_ms_per_pod" in grown
            else ""
        )
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    logs = args.logs or Path(tempfile.mkdtemp(prefix="scale-harness-"))
    logs.mkdir(parents=True, exist_ok=True)
    started = datetime.now(UTC)
    levels = asyncio.run(run_all(args, logs))
    run = {
        "label": args.label,
        "date": started.date().isoformat(),
        "started": started.isoformat(timespec="seconds"),
        "command": "python -m bench.scale "
        + shlex.join(sys.argv[1:] if argv is None else list(argv)),
        "commit": git_commit(),
        "machine": machine(),
        "python": platform.python_version(),
        "leader_elect": args.leader_elect or args.failover,
        "failover": args.failover,
        "current_status": args.current_status,
        "note": args.note,
        "logs": str(logs),
        "levels": levels,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    # The label may hold dots (a version), so the suffix is appended, not swapped.
    stem = args.out / f"{run['date']}-scale-harness-{args.label}"
    Path(f"{stem}.json").write_text(json.dumps(run, indent=1) + "\n")
    Path(f"{stem}.md").write_text(report.render(run))
    print(f"scale: results in {stem}.md and .json (operator logs in {logs})")
    return 1 if any(r.get("error") for r in levels) else 0


if __name__ == "__main__":
    sys.exit(main())
