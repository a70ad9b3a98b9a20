"""The result's PNG plots (matplotlib, no display needed)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on a CI machine

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from .runner import Round
from .workloads import CONTROLLERS, Arm

COLOURS = {
    Arm.BUILTIN: "tab:blue",
    Arm.OPERATOR: "tab:orange",
    Arm.OPERATOR_JOB: "tab:green",
    Arm.CEILING: "tab:gray",
}


def _save(fig: Figure, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _median_round(rounds: Sequence[Round], key: str) -> Round | None:
    """The round whose ``key`` metric is the median one (the typical run, not a mix)."""
    usable = sorted(
        (r for r in rounds if r.error is None and key in r.metrics), key=lambda r: r.metrics[key]
    )
    return usable[len(usable) // 2] if usable else None


def pods_over_time(rounds: dict[str, list[Round]], path: Path) -> None:
    """Scenario 1: pods succeeded over time since the job was seen, one panel per setting,
    every arm's median round on the same axis."""
    fig, axes = plt.subplots(1, len(rounds), figsize=(6 * len(rounds), 4.5), squeeze=False)
    for ax, (setting, rs) in zip(axes[0], rounds.items(), strict=True):
        for arm in Arm:
            chosen = _median_round(
                [r for r in rs if r.scenario == "s1" and r.arm is arm], "makespan_s"
            )
            if chosen is None:
                continue
            times = sorted(chosen.series.get("succeeded", []))
            ax.step(
                times,
                range(1, len(times) + 1),
                where="post",
                color=COLOURS[arm],
                label=f"{arm.label} ({chosen.metrics['pods_per_s']:.1f} pods/s)",
            )
        ax.set_title(f"scenario 1, {setting}")
        ax.set_xlabel("seconds since the job was created")
        ax.set_ylabel("pods succeeded")
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right")
    _save(fig, path)


def latency_cdfs(rounds: dict[str, list[Round]], path: Path) -> None:
    """Scenario 3: CDFs of created → first pod and last pod done → Complete, every
    round's jobs pooled, per arm and setting."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    styles = ["-", "--", ":"]
    for style, (setting, rs) in zip(styles, rounds.items(), strict=False):
        for arm in CONTROLLERS:
            mine = [r for r in rs if r.scenario == "s3" and r.arm is arm and r.error is None]
            for ax, series in zip(axes, ("first_pod", "complete"), strict=True):
                # A log axis cannot show 0: sub-0.1 ms (or, across two watch streams,
                # slightly negative) differences are drawn at 0.1 ms.
                values = sorted(max(v * 1000, 0.1) for r in mine for v in r.series.get(series, []))
                if not values:
                    continue
                fractions = [(i + 1) / len(values) for i in range(len(values))]
                ax.step(
                    values,
                    fractions,
                    where="post",
                    linestyle=style,
                    color=COLOURS[arm],
                    label=f"{arm.label}, {setting}",
                )
    for ax, title in zip(
        axes, ("created → first pod", "last pod Succeeded → Complete"), strict=True
    ):
        ax.set_title(f"scenario 3: {title}")
        ax.set_xscale("log")
        ax.set_xlabel("milliseconds (log scale)")
        ax.set_ylabel("fraction of jobs")
        ax.grid(alpha=0.3, which="both")
        ax.legend(loc="lower right")
    _save(fig, path)


def _curve_rounds(rounds: dict[str, list[Round]]) -> list[Round]:
    return [
        r
        for rs in rounds.values()
        for r in rs
        if r.scenario.startswith("s8-") and r.scenario != "s8-restart" and r.error is None
    ]


def has_curve(rounds: dict[str, list[Round]]) -> bool:
    return bool(_curve_rounds(rounds))


def _curve_points(
    rounds: dict[str, list[Round]], arm: Arm, x: str, needed: str
) -> list[tuple[float, dict[str, float]]]:
    """Scenario 8's levels of ``arm`` that have the figure ``needed``: (``x``, the
    level's figures), by ``x``."""
    mine = [r for r in _curve_rounds(rounds) if r.arm is arm and needed in r.metrics]
    return sorted(((r.metrics[x], r.metrics) for r in mine), key=lambda point: point[0])


def curve_rss(rounds: dict[str, list[Round]], path: Path) -> None:
    """Scenario 8: each controller's RSS (steady, at each level) against the live objects
    (jobs and pods) it runs, both controllers on one axis; the API server's and etcd's
    dotted, by the arm whose level they served."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for arm in CONTROLLERS:
        points = _curve_points(rounds, arm, "live_objects", "controller_rss_mb")
        if not points:
            continue
        xs = [x for x, _ in points]
        name = "kube-controller-manager" if arm is Arm.BUILTIN else "operator"
        ax.plot(
            xs,
            [m["controller_rss_mb"] for _, m in points],
            marker="o",
            color=COLOURS[arm],
            label=f"{name} ({arm.label})",
        )
        for key, style in (("apiserver", ":"), ("etcd", "-.")):
            if all(f"{key}_rss_mb" in m for _, m in points):
                ys = [m[f"{key}_rss_mb"] for _, m in points]
                ax.plot(
                    xs,
                    ys,
                    linestyle=style,
                    marker="x",
                    color=COLOURS[arm],
                    alpha=0.6,
                    label=f"{key} ({arm.label})",
                )
    ax.set_title("scenario 8: RSS against live objects")
    ax.set_xlabel("live jobs + pods")
    ax.set_ylabel("RSS (MiB)")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize="small")
    _save(fig, path)


def curve_reaction(rounds: dict[str, list[Round]], path: Path) -> None:
    """Scenario 8: the probe jobs' created → first pod p50 and p99 against the level."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for arm in CONTROLLERS:
        points = _curve_points(rounds, arm, "level_jobs", "first_pod_p50_ms")
        if not points:
            continue
        xs = [x for x, _ in points]
        for key, style in (("first_pod_p50_ms", "-"), ("first_pod_p99_ms", "--")):
            ax.plot(
                xs,
                [max(m[key], 0.1) for _, m in points],
                marker="o",
                linestyle=style,
                color=COLOURS[arm],
                label=f"{arm.label} {key.split('_')[2]}",
            )
    ax.set_title("scenario 8: created → first pod, against the level")
    ax.set_xlabel("running jobs (5 pods each)")
    ax.set_ylabel("milliseconds (log scale)")
    ax.set_yscale("log")
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="upper left", fontsize="small")
    _save(fig, path)
