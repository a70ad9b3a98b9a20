"""``python -m bench``: the ParallelJob operator against the built-in Job controller on
the local cluster (issue 7). See README, "Benchmark"."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import date
from functools import partial
from pathlib import Path

from . import ceiling, plots, report
from .environment import (
    SETTINGS,
    Setting,
    deploy_operator,
    git_commit,
    machine,
    operator_deployment,
    versions,
)
from .kube import ApiError, Kube, load_credentials
from .runner import CLUSTER_DIR, REPO_ROOT, Bench, Body, Round, poll
from .scenarios import (
    FULL,
    QUICK,
    Sizes,
    background,
    idle,
    many_jobs,
    one_job,
    reaction,
    scale,
    scale_up,
)
from .workloads import Arm

BOTH = (Arm.BUILTIN, Arm.OPERATOR)
SCENARIOS = ("s1", "s2", "s3", "s4", "s5", "s6", "s7")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--quick",
        action="store_true",
        default=os.environ.get("BENCH_QUICK", "") not in ("", "0"),
        help="every scenario once, scaled down (a smoke test; also BENCH_QUICK=1)",
    )
    parser.add_argument("--rounds", type=int, help="rounds per arm (default 5; quick: 1)")
    parser.add_argument(
        "--settings",
        default="equal,defaults",
        help="comma list of operator settings: equal (API budget), defaults",
    )
    parser.add_argument(
        "--scenarios", default=",".join(SCENARIOS), help="comma list of s1..s7 (default all)"
    )
    parser.add_argument(
        "--out", type=Path, default=REPO_ROOT / "bench" / "results", help="results directory"
    )
    args = parser.parse_args(argv)
    unknown = set(args.settings.split(",")) - set(SETTINGS)
    unknown |= set(args.scenarios.split(",")) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown setting or scenario: {', '.join(sorted(unknown))}")
    return args


class Plan:
    """The rounds of one setting, arms alternating within every scenario."""

    def __init__(
        self,
        bench: Bench,
        sizes: Sizes,
        scenarios: set[str],
        guard: Callable[[], Awaitable[None]],
    ) -> None:
        self.bench = bench
        self.sizes = sizes
        self.scenarios = scenarios
        #: Runs before every round: puts the operator back if someone replaced it.
        self.guard = guard
        self.rounds: list[Round] = []

    async def alternate(self, arms: Sequence[Arm], *steps: tuple[str, Body]) -> None:
        for index in range(1, self.sizes.rounds + 1):
            for key, body in steps:
                for arm in arms:
                    await self.guard()
                    self.rounds.append(await self.bench.run_round(key, arm, index, body))

    async def run(self) -> list[Round]:
        s, want = self.sizes, self.scenarios
        s1 = one_job(s.one_job_completions, s.one_job_parallelism)
        s3 = reaction(s.reaction_jobs, s.reaction_rate)
        if s.warmup:
            for arm in BOTH:  # discarded: caches, connections, first-time costs
                await self.bench.run_round("warm-up", arm, 0, s1)
        if "s1" in want:
            await self.alternate((*BOTH, Arm.CEILING), ("s1", s1))
        if "s2" in want:
            await self.alternate(BOTH, ("s2", many_jobs(s.many_jobs, s.many_jobs_completions)))
        if "s3" in want:
            await self.alternate(BOTH, ("s3", s3))
        if "s4" in want:
            await self.alternate(BOTH, ("s4", scale_up(s.scale_to)))
        if "s5" in want:
            async with background(self.bench, Arm.OPERATOR, s.background_jobs):
                await self.alternate(BOTH, ("s5a-s1", s1), ("s5a-s3", s3))
            async with background(self.bench, Arm.BUILTIN, s.background_jobs):
                await self.alternate((Arm.BUILTIN,), ("s5b-s1", s1), ("s5b-s3", s3))
        if "s6" in want:
            await self.alternate(BOTH, ("s6", scale(s.scale_jobs, s.scale_completions)))
        if "s7" in want:
            await self.alternate(BOTH, ("s7", idle(s.idle_jobs, s.idle_window)))
        return self.rounds


async def remove_leftovers(bench: Bench) -> None:
    """Namespaces an interrupted earlier run left behind."""
    listing = await bench.kube.get("/api/v1/namespaces", labelSelector="paralleljob.dev/bench")
    for item in listing["items"]:
        bench.log(f"removing namespace {item['metadata']['name']} left by an earlier run")
        await bench.delete_namespace(item["metadata"]["name"])


async def run(args: argparse.Namespace) -> int:
    sizes = QUICK if args.quick else FULL
    if args.rounds:
        sizes = replace(sizes, rounds=args.rounds)
    settings = [SETTINGS[name] for name in args.settings.split(",")]
    audit_log = CLUSTER_DIR / "logs" / "audit.log"
    if not audit_log.exists():
        print(
            f"bench: error: no {audit_log}: the local cluster predates audit logging; "
            "restart it (make cluster-down; make cluster)",
            file=sys.stderr,
        )
        return 1
    started = time.monotonic()
    rounds: dict[str, list[Round]] = {}
    setting_info: dict[str, dict[str, object]] = {}
    async with Kube(load_credentials(CLUSTER_DIR / "kubeconfig")) as kube:
        bench = Bench(kube, progress_every=sizes.progress_every, defer_deletion=args.quick)
        bench.log(f"{'quick' if args.quick else 'full'} run: {sizes}")
        await remove_leftovers(bench)
        await ceiling.ensure_identity(kube)
        image: str | None = None
        for setting in settings:
            image = await deploy(bench, setting, image)
            operator = await operator_deployment(kube)
            setting_info[setting.name] = {"description": setting.description, "operator": operator}
            guard = partial(keep_operator, bench, setting, operator)
            plan = Plan(bench, sizes, set(args.scenarios.split(",")), guard)
            rounds[setting.name] = await plan.run()
            await bench.wait_deletions()
    meta = {
        "date": date.today().isoformat(),
        "quick": args.quick,
        "commit": git_commit(),
        "rounds": sizes.rounds,
        "sizes": vars(sizes),
        "versions": versions(),
        "machine": machine(),
        "settings": setting_info,
        "duration_min": (time.monotonic() - started) / 60,
    }
    write_results(args.out, meta, rounds, sizes)
    return 0 if all_produced_numbers(rounds) else 1


async def deploy(bench: Bench, setting: Setting, image: str | None) -> str:
    """Deploys the operator with ``setting`` (the first deploy builds the image; later
    ones reuse it) and waits until its pod is the only one."""
    bench.log(f"deploying the operator: {setting.description}")
    await asyncio.to_thread(deploy_operator, setting, image)

    async def one_operator_pod() -> bool:
        try:
            await bench.refresh_operator()
        except RuntimeError:
            return False
        return True

    await poll(one_operator_pod, timeout=120, what="exactly one running operator pod")
    return str((await operator_deployment(bench.kube))["image"])


async def keep_operator(bench: Bench, setting: Setting, expected: dict[str, object]) -> None:
    """Redeploys the operator if it is no longer what this setting deployed (the cluster
    is shared: a test run may have redeployed or removed it)."""
    try:
        current = await operator_deployment(bench.kube)
    except ApiError as exc:
        if exc.status != 404:
            raise
        current = {}
    if current != expected:
        bench.log(f"the operator was changed or removed ({current}); deploying it again")
        await deploy(bench, setting, str(expected["image"]))


def all_produced_numbers(rounds: dict[str, list[Round]]) -> bool:
    """Every scenario and arm of every setting has at least one round with figures."""
    groups: dict[tuple[str, str, Arm], bool] = {}
    for setting, rs in rounds.items():
        for r in rs:
            key = (setting, r.scenario, r.arm)
            groups[key] = groups.get(key, False) or (r.error is None and bool(r.metrics))
    return all(groups.values())


def write_results(
    out: Path, meta: dict[str, object], rounds: dict[str, list[Round]], sizes: Sizes
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{meta['date']}{'-quick' if meta['quick'] else ''}"
    summaries = {setting: report.summarize(rs) for setting, rs in rounds.items()}
    pods_png, latency_png = f"{stem}-s1-pods.png", f"{stem}-s3-latency.png"
    plots.pods_over_time(rounds, out / pods_png)
    plots.latency_cdfs(rounds, out / latency_png)
    text = report.markdown(meta, rounds, summaries, sizes, [pods_png, latency_png])
    (out / f"{stem}.md").write_text(text)
    data = report.to_json(meta, rounds, summaries)
    (out / f"{stem}.json").write_text(json.dumps(data, indent=1) + "\n")
    print(text)
    print(f"bench: results in {out / stem}.md (.json, plots beside it)", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    return asyncio.run(run(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
