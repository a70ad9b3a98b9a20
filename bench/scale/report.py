"""The scale harness's results as Markdown: one row per level, the probes, the memory by
structure, and how startup CPU grows with the objects. Pure."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any


def _n(value: Any, unit: str = "", digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}{unit}"
    return f"{value:,}{unit}" if isinstance(value, int) else f"{value}{unit}"


def _lag(lag: dict[str, Any] | None) -> str:
    """The largest loop lag as its histogram bucket, e.g. "0.25-0.5 s"."""
    if not lag or not lag.get("max_between_s"):
        return "-"
    low, high = lag["max_between_s"]
    return f"> {low:g} s" if math.isinf(high) else f"{low:g}-{high:g} s"


def _ms(stats: dict[str, float] | None, key: str) -> str:
    return _n(stats.get(key), " ms") if stats else "-"


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


STARTUP_COLUMNS = (
    "objects (jobs x pods)",
    "mode",
    "pods listed",
    "first status write",
    "every job synced",
    "CPU until listed",
    "CPU until synced",
    "RSS at sync",
    "RSS peak (VmHWM)",
    "RSS at rest",
    "loop lag max, until synced",
    "at rest",
    "/healthz max",
)


def _synced_cell(r: dict[str, Any]) -> str:
    """When every job was synced; or how far it got before the timeout."""
    if r.get("synced"):
        return _n(r.get("wall_synced_s"), " s")
    return (
        f"not in {_n(r.get('sync_timeout_s'), ' s', 0)} ({r.get('jobs_synced', 0):,} of "
        f"{r['level']['jobs']:,}; CPU {_n(r.get('cpu_at_timeout_s'), ' s')})"
    )


def _startup_row(r: dict[str, Any]) -> str:
    lv, lag = r["level"], r.get("loop_lag") or {}
    return _row(
        [
            f"{lv['objects']:,} ({lv['jobs']:,} x {lv['pods_per_job']})",
            r["mode"],
            _n(r.get("wall_pods_listed_s"), " s"),
            _n(r.get("wall_first_write_s"), " s"),
            _synced_cell(r),
            _n(r.get("cpu_pods_listed_s"), " s"),
            _n(r.get("cpu_synced_s"), " s"),
            _n(r.get("rss_at_sync_mib"), " MiB"),
            _n(r.get("rss_peak_mib"), " MiB"),
            _n(r.get("rss_steady_mib"), " MiB"),
            _lag(lag.get("until_synced")),
            _lag(lag.get("at_rest")),
            _n((r.get("healthz") or {}).get("max_s"), " s", 3),
        ]
    )


def _startup_rows(levels: Sequence[dict[str, Any]]) -> list[str]:
    align = [
        "---" if c in ("mode", "loop lag max, until synced", "at rest") else "---:"
        for c in STARTUP_COLUMNS
    ]
    return [_row(STARTUP_COLUMNS), _row(align), *(_startup_row(r) for r in levels)]


PROBE_COLUMNS = (
    "objects",
    "probes with a pod",
    "first pod after the job's ADDED reached the watch, p50",
    "p99",
    "max",
    "first pod after creation, p50",
    "first status write after creation, p50",
)


def _probe_rows(levels: Sequence[dict[str, Any]]) -> list[str]:
    rows = [_row(PROBE_COLUMNS), _row(["---:"] * len(PROBE_COLUMNS))]
    for r in levels:
        p = r.get("probes")
        if not p:
            continue
        watch = p.get("first_pod_after_watch")
        cells = [
            f"{r['level']['objects']:,}",
            f"{p['with_first_pod']} of {p['created']}",
            _ms(watch, "p50_ms"),
            _ms(watch, "p99_ms"),
            _ms(watch, "max_ms"),
            _ms(p.get("first_pod_after_create"), "p50_ms"),
            _ms(p.get("first_status_after_create"), "p50_ms"),
        ]
        rows.append(_row(cells))
    return rows


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


FAILOVER_COLUMNS = (
    "objects",
    "standby: pods listed",
    "standby RSS",
    "takeover after the release",
    "first pod after the takeover",
    "every job synced after the takeover",
    "leader CPU until then",
    "RSS peak",
)


def _failover_rows(levels: Sequence[dict[str, Any]]) -> list[str]:
    """A warm standby's takeover (failover.py), per level run in that mode."""
    rows = [_row(FAILOVER_COLUMNS), _row(["---:"] * len(FAILOVER_COLUMNS))]
    for r in levels:
        f = r.get("failover")
        if not f or f.get("error"):
            continue
        cells = [
            f"{r['level']['objects']:,}",
            _n(f.get("standby_pods_listed_s"), " s"),
            _n(f.get("standby_rss_mib"), " MiB"),
            _n(f.get("takeover_after_release_s"), " s", 2),
            _n(f.get("first_pod_after_takeover_s"), " s", 2),
            _n(f.get("synced_after_takeover_s"), " s", 2),
            _n(f.get("leader_cpu_s"), " s"),
            _n(f.get("peak_rss_mib"), " MiB"),
        ]
        rows.append(_row(cells))
    return rows


GROWTH_COLUMNS = (
    "running jobs before",
    "jobs created",
    "pods created",
    "created in",
    "pods created in",
    "CPU",
    "RSS before → after",
    "longest loop lag",
    "of it the operator's own",
    "longest full GC",
    "of it the operator's own",
)


def _bucket_ms(bounds: list[float] | None) -> str:
    """A pause's histogram bucket in ms, e.g. "50-100 ms"."""
    if not bounds:
        return "-"
    low, high = bounds
    return f"> {low:g} ms" if math.isinf(high) else f"{low:g}-{high:g} ms"


def _growth_rows(levels: Sequence[dict[str, Any]]) -> list[str]:
    """A running operator's growth (run.run_growth), per level run with one."""
    rows = [_row(GROWTH_COLUMNS), _row(["---:"] * len(GROWTH_COLUMNS))]
    for r in levels:
        g = r.get("growth")
        if not g:
            continue
        longest = g.get("longest_ms") or {}
        cells = [
            f"{r['level']['jobs']:,}",
            f"{g['jobs']:,} at {g['rate_per_s']:g}/s",
            _n(g.get("pods_created")),
            _n(g.get("created_s"), " s"),
            _n(g.get("pods_created_s"), " s"),
            _n(g.get("cpu_s"), " s"),
            f"{_n(g.get('rss_before_mib'), ' MiB')} → {_n(g.get('rss_after_mib'), ' MiB')}",
            *(_bucket_ms(longest.get(key)) for key in ("lag", "own", "full_gc", "full_gc_own")),
        ]
        rows.append(_row(cells))
    return rows


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
        "(/proc); every job synced: every job's status written once (the stub's record). "
        "Loop lag: the histogram bucket of the longest event-loop lag sample "
        "(`paralleljob_controller_event_loop_lag_seconds`).",
        "",
        "## Startup and rest",
        "",
        *_startup_rows(levels),
        "",
        *growth(levels),
        "",
        "## Probes: 50 jobs created at rest",
        "",
        *_probe_rows(levels),
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
        lines += [
            "## Failover: a warm standby takes over",
            "",
            "The operator stood by while another holder renewed the Lease; once it had "
            "been sent every pod (and 3 s more), the Lease was released as a stopping "
            "leader releases it, and a one-pod probe job created. Times from the takeover "
            "(the standby's write of the Lease naming itself).",
            "",
            *_failover_rows(levels),
            "",
        ]
    for r in levels:
        lines += _memory_section(r)
    lines += ["## API traffic", "", *[line for r in levels for line in _traffic_lines(r)], ""]
    lines += ["## Machine load", "", *_load_lines(levels), ""]
    if run.get("note"):
        lines += ["## Notes", "", run["note"], ""]
    return "\n".join(lines)
