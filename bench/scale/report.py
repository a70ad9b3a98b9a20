"""The scale harness's results as Markdown: one row per level, the probes, the memory by
structure, and how startup CPU grows with the objects. Pure."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any


def _n(value: Any, unit: str = "", digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}{unit}"
    return f"{value:,}{unit}" if isinstance(value, int) else f"{value}{unit}"


def _bucket(bounds: list[float] | None, unit: str) -> str:
    """The histogram bucket of the longest observation, e.g. "0.25-0.5 s"."""
    if not bounds:
        return "-"
    low, high = bounds
    return f"> {low:g} {unit}" if math.isinf(high) else f"{low:g}-{high:g} {unit}"


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def growth(levels: Sequence[dict[str, Any]]) -> list[str]:
    """How startup CPU grows between consecutive plain levels: the exponent k in
    CPU ∝ objects^k (1 linear, 2 quadratic)."""
    plain = [r for r in levels if r["mode"] == "plain" and r.get("cpu_synced_s")]
    lines = []
    for a, b in itertools.pairwise(plain):
        n_a, n_b = a["level"]["objects"], b["level"]["objects"]
        k = math.log(b["cpu_synced_s"] / a["cpu_synced_s"]) / math.log(n_b / n_a)
        lines.append(
            f"- {n_a:,} → {n_b:,} objects: CPU until synced {a['cpu_synced_s']:,.1f} → "
            f"{b['cpu_synced_s']:,.1f} s, CPU ∝ objects^{k:.2f}"
        )
    return lines


#: A table's column: its header, and its cell of a level's result and of the part of it
#: the table shows (the probes, the growth, ...; the result itself for the startup).
Cell = Callable[[dict[str, Any], dict[str, Any]], str]
Column = tuple[str, Cell]


def _value(key: str, unit: str = "", digits: int = 1) -> Cell:
    """The cell of the figure ``key`` of the part the table shows."""
    return lambda _, part: _n(part.get(key), unit, digits)


def _latency(key: str, figure: str) -> Cell:
    """The cell of one figure (``p50_ms``, ...) of the latencies ``key`` of the part."""
    return lambda _, part: _n((part.get(key) or {}).get(figure), " ms")


def _table(
    columns: Sequence[Column],
    levels: Iterable[dict[str, Any]],
    part: str = "",
    left: Sequence[str] = (),
) -> list[str]:
    """A row per level that has ``part`` (every level without one), numbers right-aligned
    but in the columns whose headers ``left`` names."""
    shown = [(r, r.get(part) if part else r) for r in levels]
    return [
        _row([header for header, _ in columns]),
        _row(["---" if header in left else "---:" for header, _ in columns]),
        *(_row([cell(r, p) for _, cell in columns]) for r, p in shown if p),
    ]


def _synced_cell(r: dict[str, Any]) -> str:
    """When every job was synced; or how far it got before the timeout."""
    if r.get("synced"):
        return _n(r.get("wall_synced_s"), " s")
    return (
        f"not in {_n(r.get('sync_timeout_s'), ' s', 0)} ({r.get('jobs_synced', 0):,} of "
        f"{r['level']['jobs']:,}; CPU {_n(r.get('cpu_at_timeout_s'), ' s')})"
    )


def _objects(r: dict[str, Any], _part: dict[str, Any]) -> str:
    return f"{r['level']['objects']:,}"


def _jobs_x_pods(r: dict[str, Any], _part: dict[str, Any]) -> str:
    lv = r["level"]
    return f"{lv['objects']:,} ({lv['jobs']:,} x {lv['pods_per_job']})"


def _loop_lag(key: str) -> Cell:
    """The cell of the longest loop lag ``until_synced`` or ``at_rest``."""
    return lambda r, _: _bucket(
        ((r.get("loop_lag") or {}).get(key) or {}).get("max_between_s"), "s"
    )


STARTUP: list[Column] = [
    ("objects (jobs x pods)", _jobs_x_pods),
    ("mode", lambda r, _: str(r["mode"])),
    ("pods listed", _value("wall_pods_listed_s", " s")),
    ("first status write", _value("wall_first_write_s", " s")),
    ("every job synced", lambda r, _: _synced_cell(r)),
    ("a job created at the start: first pod", _value("restart_probe_first_pod_s", " s")),
    ("CPU until listed", _value("cpu_pods_listed_s", " s")),
    ("CPU until synced", _value("cpu_synced_s", " s")),
    ("RSS at sync", _value("rss_at_sync_mib", " MiB")),
    ("RSS peak (VmHWM)", _value("rss_peak_mib", " MiB")),
    ("RSS at rest", _value("rss_steady_mib", " MiB")),
    ("loop lag max, until synced", _loop_lag("until_synced")),
    ("at rest", _loop_lag("at_rest")),
    ("/healthz max", lambda r, _: _n((r.get("healthz") or {}).get("max_s"), " s", 3)),
]
PROBES: list[Column] = [
    ("objects", _objects),
    ("probes with a pod", lambda _, p: f"{p['with_first_pod']} of {p['created']}"),
    (
        "first pod after the job's ADDED reached the watch, p50",
        _latency("first_pod_after_watch", "p50_ms"),
    ),
    ("p99", _latency("first_pod_after_watch", "p99_ms")),
    ("max", _latency("first_pod_after_watch", "max_ms")),
    ("first pod after creation, p50", _latency("first_pod_after_create", "p50_ms")),
    ("first status write after creation, p50", _latency("first_status_after_create", "p50_ms")),
]


def _memory_section(r: dict[str, Any]) -> list[str]:
    mem = r.get("memory") or {}
    if "top" not in mem:
        return []
    lv = r["level"]
    out = [
        f"### Memory at rest by structure, {lv['objects']:,} objects ({lv['jobs']:,} jobs x "
        f"{lv['pods_per_job']} pods)",
        "",
        f"Grown since the baseline (before any listing): {mem['grown_bytes'] / 2**20:,.1f} MiB in "
        f"{mem['grown_blocks']:,} blocks, **{mem['bytes_per_object']:,.0f} bytes per object** "
        f"(tracemalloc: Python's allocations only; the RSS at rest under tracing was "
        f"{_n(r.get('rss_steady_mib'), ' MiB')}).",
        "",
        "| package | bytes per object | MiB |",
        "| --- | ---: | ---: |",
    ]
    out += [
        f"| {p['package']} | {p['bytes_per_object']:,.0f} | {p['bytes'] / 2**20:,.1f} |"
        for p in mem["packages"]
    ]
    out += [
        "",
        "| where (file:line) | bytes per object | blocks | source |",
        "| --- | ---: | ---: | --- |",
    ]
    out += [
        f"| `{t['where']}` | {t['bytes_per_object']:,.0f} | {t['blocks']:,} | "
        f"`{t['source'][:90].replace('|', '¦')}` |"
        for t in mem["top"]
    ]
    return [*out, ""]


def _traffic_lines(r: dict[str, Any]) -> list[str]:
    lists = ", ".join(
        f"{name} {v['requests']} ({v['paged']} paged, {v['items']:,} items, "
        f"{v['bytes'] / 2**20:,.1f} MiB)"
        for name, v in sorted((r.get("lists") or {}).items())
    )
    writes = r.get("status_writes_per_job_at_sync") or {}
    unknown = ", ".join(f"`{k}` x{v}" for k, v in (r.get("unknown_paths") or {}).items()) or "none"
    return [
        f"- {r['level']['objects']:,} objects, {r['mode']}: LISTs: {lists or 'none'}; watches "
        f"{len(r.get('watches') or [])}; status writes per job at sync {writes.get('min', 0)}-"
        f"{writes.get('max', 0)}; writes to jobs themselves {r.get('job_writes', 0)}; pods "
        f"created {r.get('pod_creations', 0)}; paths not served: {unknown}"
        + (f"; **{r['error']}**" if r.get("error") else "")
    ]


def _load_lines(levels: Sequence[dict[str, Any]]) -> list[str]:
    """The 1-minute load average around each level (2 cores shared with other work)."""
    return [
        f"- {r['level']['objects']:,} objects, {r['mode']}: load average "
        f"{_n(r.get('load_average_at_start'), '', 2)} at the start, "
        f"{_n(r.get('load_average_at_end'), '', 2)} at the end"
        for r in levels
    ]


#: A warm standby's takeover (failover.py), per level run in that mode.
FAILOVER: list[Column] = [
    ("objects", _objects),
    ("standby: pods listed", _value("standby_pods_listed_s", " s")),
    ("standby RSS", _value("standby_rss_mib", " MiB")),
    ("takeover after the release", _value("takeover_after_release_s", " s", 2)),
    ("first pod after the takeover", _value("first_pod_after_takeover_s", " s", 2)),
    ("every job synced after the takeover", _value("synced_after_takeover_s", " s", 2)),
    ("leader CPU until then", _value("leader_cpu_s", " s")),
    ("RSS peak", _value("peak_rss_mib", " MiB")),
]


def _longest(key: str) -> Cell:
    """The cell of a growth's longest pause of ``key`` (run.PAUSE_METRICS)."""
    return lambda _, g: _bucket((g.get("longest_ms") or {}).get(key), "ms")


#: A running operator's growth (run.LevelRun.growth), per level run with one.
GROWTH: list[Column] = [
    ("running jobs before", lambda r, _: f"{r['level']['jobs']:,}"),
    ("jobs created", lambda _, g: f"{g['jobs']:,} at {g['rate_per_s']:g}/s"),
    ("pods created", _value("pods_created")),
    ("created in", _value("created_s", " s")),
    ("pods created in", _value("pods_created_s", " s")),
    ("every job Complete in", _value("complete_s", " s")),
    ("CPU", _value("cpu_s", " s")),
    ("CPU per pod lifecycle", _value("cpu_ms_per_pod", " ms", 2)),
    ("events", _value("events")),
    ("CPU per event", _value("cpu_ms_per_event", " ms", 3)),
    (
        "RSS before → after",
        lambda _, g: (
            f"{_n(g.get('rss_before_mib'), ' MiB')} → {_n(g.get('rss_after_mib'), ' MiB')}"
        ),
    ),
    ("longest loop lag", _longest("lag")),
    ("of it the operator's own", _longest("own")),
    ("longest full GC", _longest("full_gc")),
    ("of it the operator's own", _longest("full_gc_own")),
]


def _growth_rows(levels: Sequence[dict[str, Any]]) -> list[str]:
    return _table(GROWTH, levels, "growth")


def render(run: dict[str, Any]) -> str:
    levels: list[dict[str, Any]] = run["levels"]
    first = levels[0] if levels else {}
    sizes = first.get("sizes", {})
    lines = [
        f"# Scale harness: {run['label']} ({run['date']})",
        "",
        f"`{run['command']}` on commit {run['commit']}; {run['machine']['cpus']} CPUs "
        f"({run['machine']['cpu_model']}), {run['machine']['memory_gib']} GiB; Python "
        f"{run['python']}. The operator as the Deployment runs it (`paralleljob-operator`, "
        f"its ConfigMap's settings, {'with' if run['leader_elect'] else 'without'} leader "
        "election) against the stub API of `tests/support/stub_api/` on 127.0.0.1: every "
        "object there when it starts (a restart or failover at that scale), pods "
        f"{sizes.get('pod_bytes', 0):,} bytes and jobs {sizes.get('job_bytes', 0):,} bytes of "
        'JSON each, as the API server returns them. See docs/benchmark.md, "The scale harness".',
        "",
        "Times are from the operator's process start; CPU is its user + system seconds "
        "(/proc); every job synced: "
        + (
            "the jobs' statuses lacked nothing (`--current-status`), so as the operator's "
            "metrics say (every job tracked and synced once, none pending). "
            if run.get("current_status")
            else "every job's status written once (the stub's record). "
        )
        + "Loop lag: the histogram bucket of the longest event-loop lag sample "
        "(`paralleljob_controller_event_loop_lag_seconds`).",
        "",
        "## Startup and rest",
        "",
        *_table(STARTUP, levels, left=("mode", "loop lag max, until synced", "at rest")),
        "",
        *growth(levels),
        "",
        "## Probes: 50 jobs created at rest",
        "",
        *_table(PROBES, levels, "probes"),
        "",
    ]
    if any(r.get("growth") for r in levels):
        lines += [
            "## Growth: new jobs while the operator runs",
            "",
            "After the probes, new jobs of 5 pods each were created at a steady rate; the "
            "stub ran each pod 0.5 s after its creation, as kwok does. The pauses are the "
            "buckets of the operator's histograms over the growth: the loop's lag, the part "
            "of it the operator's own work caused (the rest: its thread waiting for a CPU), "
            "and its full GC collections.",
            "",
            *_growth_rows(levels),
            "",
        ]
    if run.get("failover"):
        taken_over = [r for r in levels if not (r.get("failover") or {}).get("error")]
        lines += [
            "## Failover: a warm standby takes over",
            "",
            "The operator stood by while another holder renewed the Lease; once it had "
            "been sent every pod (and 3 s more), the Lease was released as a stopping "
            "leader releases it, and a one-pod probe job created. Times from the takeover "
            "(the standby's write of the Lease naming itself).",
            "",
            *_table(FAILOVER, taken_over, "failover"),
            "",
        ]
    for r in levels:
        lines += _memory_section(r)
    lines += ["## API traffic", "", *[line for r in levels for line in _traffic_lines(r)], ""]
    lines += ["## Machine load", "", *_load_lines(levels), ""]
    if run.get("note"):
        lines += ["## Notes", "", run["note"], ""]
    return "\n".join(lines)
