"""``python -m bench``: the ParallelJob operator against the built-in Job controller on
the local cluster (issue 7). See docs/benchmark.md."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import date
from functools import partial
from pathlib import Path
from typing import Any

from . import ceiling, curve, environment, lock, output, scenarios
from .environment import DEFAULTS, SETTINGS, OverriddenConfig, Setting, operator_deployment
from .kube import Kube, load_credentials, tolerating
from .runner import CLUSTER_DIR, REPO_ROOT, Bench, Body, Round, poll
from .scenarios import FULL, QUICK, Sizes
from .workloads import CONTROLLERS, Arm

#: The built-in and ParallelJobs: the arms of the scenarios the Job arm is not in.
BOTH = (Arm.BUILTIN, Arm.OPERATOR)
SCENARIOS = ("s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8")
#: Scenario 8's arms, in order: the operator's first (its levels take minutes, not tens).
CURVE_ARMS = (Arm.OPERATOR, Arm.OPERATOR_JOB, Arm.BUILTIN)
#: What a quick run measures in a setting other than the defaults.
QUICK_BUDGET_SCENARIOS = ("s1",)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    add = parser.add_argument
    add(
        "--quick",
        action="store_true",
        default=os.environ.get("BENCH_QUICK", "") not in ("", "0"),
        help="every scenario once, scaled down, and the API budget in scenario 1 only (a smoke "
        "test; also BENCH_QUICK=1)",
    )
    add("--rounds", type=int, help="rounds per arm (default 5; quick: 1)")
    add(
        "--settings",
        default="equal,defaults",
        help="comma list of operator settings: equal (API budget), defaults",
    )
    add("--scenarios", default=",".join(SCENARIOS), help="comma list of s1..s8 (default all)")
    add(
        "--s8-levels",
        default="",
        help="comma list of scenario 8's levels, running jobs (default 1000,5000,10000; quick: 20)",
    )
    add(
        "--s8-arms",
        default=",".join(a.value for a in (Arm.OPERATOR, Arm.BUILTIN)),
        help="comma list of scenario 8's arms (default ParallelJob,Job; also Job-operator)",
    )
    add("--note", default="", help="a line for the results' header")
    add(
        "--arms",
        default=",".join(arm.value for arm in Arm),
        help="comma list of the arms to run: "
        + ", ".join(arm.value for arm in Arm)
        + f" ({Arm.OPERATOR_JOB.value}: batch/v1 Jobs whose spec.managedBy names the operator; "
        "default all)",
    )
    add(
        "--part",
        default="",
        help="a name for a partial run's files (<date>-<part>.md), so that it does not "
        "replace the results of another run of the same day",
    )
    add("--out", type=Path, default=REPO_ROOT / "bench" / "results", help="results directory")
    args = parser.parse_args(argv)
    unknown = set(args.settings.split(",")) - set(SETTINGS)
    unknown |= set(args.scenarios.split(",")) - set(SCENARIOS)
    unknown |= set(args.arms.split(",")) - {arm.value for arm in Arm}
    unknown |= set(args.s8_arms.split(",")) - {arm.value for arm in CURVE_ARMS}
    if args.s8_levels and not all(x.isdigit() and int(x) > 0 for x in args.s8_levels.split(",")):
        parser.error(f"--s8-levels: positive integers, comma separated: {args.s8_levels}")
    if unknown:
        parser.error(f"unknown setting, scenario or arm: {', '.join(sorted(unknown))}")
    return args


class Operator:
    """Keeps the operator deployed with the setting the next round needs."""

    def __init__(self, bench: Bench) -> None:
        self.bench = bench
        #: The image the first deploy built (PJ_IMAGE, if set, skips even that build).
        self.image: str | None = None
        #: Per setting, what its deploy left running: image and configuration.
        self.deployed: dict[str, dict[str, Any]] = {}

    async def ensure(self, setting: Setting) -> bool:
        """Deploys ``setting`` unless it is what runs; True when it deployed. The cluster
        may be shared: a test run may have replaced or removed the operator meanwhile."""
        current: dict[str, Any] = {}
        with tolerating(404):
            current = await operator_deployment(self.bench.kube)
        if current and current == self.deployed.get(setting.name):
            return False
        if current not in self.deployed.values() and self.deployed:
            self.bench.log(f"the operator is not as this run deployed it ({current})")
        self.bench.log(f"deploying the operator: {setting.description}")
        await asyncio.to_thread(environment.deploy_operator, setting, self.image)
        await poll(self._leader_pod, timeout=120, what="a running operator pod holding the Lease")
        self.deployed[setting.name] = await operator_deployment(self.bench.kube)
        self.image = str(self.deployed[setting.name]["image"])
        return True

    async def _leader_pod(self) -> bool:
        with contextlib.suppress(RuntimeError):
            await self.bench.refresh_operator()
            return True
        return False


class Plan:
    """The rounds of one scenario in one setting, arms alternating."""

    def __init__(
        self,
        bench: Bench,
        sizes: Sizes,
        operator: Operator,
        arms: frozenset[Arm],
        curve_arms: Sequence[Arm] = (Arm.OPERATOR, Arm.BUILTIN),
        record: Callable[[str, Round], None] = lambda setting, r: None,
    ) -> None:
        #: Takes each round of scenario 8 as it ends: (setting name, round).
        self.record = record
        self.bench = bench
        self.sizes = sizes
        self.operator = operator
        self.arms = arms
        self.curve_arms = [a for a in CURVE_ARMS if a in curve_arms and a in arms]
        self.one_job = scenarios.one_job(sizes.one_job_completions, sizes.one_job_parallelism)
        self.reaction = scenarios.reaction(sizes.reaction_jobs, sizes.reaction_rate)

    async def _ensure(self, setting: Setting) -> None:
        if await self.operator.ensure(setting) and self.sizes.warmup_completions:
            # Discarded: a fresh operator's (and the first round's) one-time costs.
            warmup = scenarios.one_job(
                self.sizes.warmup_completions, self.sizes.one_job_parallelism
            )
            for arm in CONTROLLERS:
                if arm in self.arms:
                    await self.bench.run_round("warm-up", arm, 0, warmup)

    async def _alternate(
        self, setting: Setting, arms: Sequence[Arm], *steps: tuple[str, Body], rounds: int = 0
    ) -> list[Round]:
        out = []
        arms = [arm for arm in arms if arm in self.arms]
        for index in range(1, (rounds or self.sizes.rounds) + 1):
            for key, body in steps:
                for arm in arms:
                    await self._ensure(setting)
                    out.append(await self.bench.run_round(key, arm, index, body))
        return out

    async def run(self, scenario: str, setting: Setting) -> list[Round]:
        s = self.sizes
        await self._ensure(setting)
        if scenario == "s5":
            return await self._under_load(setting)
        if scenario == "s8":
            return await self._scale_curve(setting)
        # The others: one round body each, for these arms.
        plain: dict[str, tuple[Sequence[Arm], Body]] = {
            "s1": ((*CONTROLLERS, Arm.CEILING), self.one_job),
            "s2": (CONTROLLERS, scenarios.many_jobs(s.many_jobs, s.many_jobs_completions)),
            "s3": (CONTROLLERS, self.reaction),
            "s4": (CONTROLLERS, scenarios.scale_up(s.scale_to)),
            "s6": (BOTH, scenarios.scale(s.scale_jobs, s.scale_completions)),
            "s7": (CONTROLLERS, scenarios.idle(s.idle_jobs, s.idle_window)),
        }
        arms, body = plain[scenario]
        rounds = s.scale_rounds if scenario == "s6" else 0
        return await self._alternate(setting, arms, (scenario, body), rounds=rounds)

    async def _scale_curve(self, setting: Setting) -> list[Round]:
        """Scenario 8, in the defaults only (a scale curve, not a budget comparison): each
        arm's levels, then its restart at the top level; its rounds go to ``record`` as
        each ends (the scenario takes hours: the results are written after each)."""
        if setting.name != DEFAULTS.name:
            return []
        async with curve.Scraper(self.bench, self.bench.kube.credentials) as scraper:
            record = partial(self.record, setting.name)
            for arm in self.curve_arms:
                await self.operator.ensure(setting)
                await curve.scale_curve(self.bench, arm, self.sizes, scraper, record, restart=True)
        return []  # each round went to record as it ended

    async def _under_load(self, setting: Setting) -> list[Round]:
        """Scenario 5: 1 and 3 under the operator's background load (both arms), then
        the built-in's under its own."""
        steps = (("s1", self.one_job), ("s3", self.reaction))
        out = []
        async with scenarios.background(self.bench, Arm.OPERATOR, self.sizes.background_jobs):
            loaded = [(f"s5a-{key}", body) for key, body in steps]
            out += await self._alternate(setting, BOTH, *loaded)
        if Arm.BUILTIN not in self.arms:  # its background would serve no round
            return out
        async with scenarios.background(self.bench, Arm.BUILTIN, self.sizes.background_jobs):
            loaded = [(f"s5b-{key}", body) for key, body in steps]
            out += await self._alternate(setting, (Arm.BUILTIN,), *loaded)
        return out


async def remove_leftovers(bench: Bench) -> None:
    """Namespaces an interrupted earlier run left behind."""
    listing = await bench.kube.get("/api/v1/namespaces", labelSelector="paralleljob.dev/bench")
    for item in listing["items"]:
        bench.log(f"removing namespace {item['metadata']['name']} left by an earlier run")
        await bench.delete_namespace(item["metadata"]["name"])


class Run:
    """One invocation: what it runs, in which order, and what it has measured so far."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.quick: bool = args.quick
        self.out: Path = args.out
        self.note: str = args.note
        self.arms = frozenset(Arm(name) for name in args.arms.split(","))
        self.part: str = args.part
        sizes = QUICK if args.quick else FULL
        if args.rounds:
            sizes = replace(sizes, rounds=args.rounds, scale_rounds=args.rounds)
        if args.s8_levels:
            levels = sorted({int(x) for x in args.s8_levels.split(",")})
            sizes = replace(sizes, curve_levels=tuple(levels))
        self.sizes = sizes
        self.curve_arms = [Arm(name) for name in args.s8_arms.split(",")]
        self.settings = [SETTINGS[name] for name in args.settings.split(",")]
        self.scenarios = [s for s in SCENARIOS if s in args.scenarios.split(",")]
        self.rounds: dict[str, list[Round]] = {s.name: [] for s in self.settings}
        self.started = time.monotonic()
        # One date for every file of the run, however long it takes.
        self.date = date.today().isoformat()
        self.deployed: dict[str, dict[str, Any]] = {}

    def order(self) -> list[tuple[str, Setting]]:
        """A full run goes scenario by scenario, each in every setting, so that an
        interrupted run still has comparable figures for what it finished (results are
        written after each); a quick run goes setting by setting: two deploys instead of
        one per scenario and setting. Being a smoke test, a quick run takes a setting other
        than the defaults through scenario 1 only, where an API budget binds first."""
        if self.quick:
            return [
                (sc, st)
                for st in self.settings
                for sc in self.scenarios
                if st.name == DEFAULTS.name or sc in QUICK_BUDGET_SCENARIOS
            ]
        return [(sc, st) for sc in self.scenarios for st in self.settings]

    async def execute(self, bench: Bench) -> None:
        operator = Operator(bench)
        self.deployed = operator.deployed
        plan = Plan(bench, self.sizes, operator, self.arms, self.curve_arms, self.record)
        await remove_leftovers(bench)
        for scenario, setting in self.order():
            self.rounds[setting.name] += await plan.run(scenario, setting)
            if not self.quick:  # a checkpoint, should the run be interrupted
                self.write(show=False)
        await bench.wait_deletions()
        bench.count_late_events(r for rs in self.rounds.values() for r in rs)

    def record(self, setting: str, r: Round) -> None:
        """A round that ended inside a long scenario: kept, and the results written."""
        self.rounds[setting].append(r)
        if not self.quick:
            self.write(show=False)

    def metadata(self) -> dict[str, Any]:
        return {
            "date": self.date,
            "quick": self.quick,
            "note": self.note,
            "commit": environment.git_commit(),
            "rounds": self.sizes.rounds,
            "sizes": vars(self.sizes),
            "versions": environment.versions(),
            "machine": environment.machine(),
            "settings": {
                s.name: {"description": s.description, "operator": self.deployed.get(s.name, {})}
                for s in self.settings
            },
            "duration_min": (time.monotonic() - self.started) / 60,
        }

    def write(self, *, show: bool = True) -> None:
        """Writes the markdown, JSON and plots; ``show`` prints the table too."""
        stem = "-".join(x for x in (self.date, "quick" if self.quick else "", self.part) if x)
        output.write(self.out, stem, self.metadata(), self.rounds, self.sizes, show=show)


async def run(args: argparse.Namespace) -> int:
    audit_log = CLUSTER_DIR / "logs" / "audit.log"
    if not audit_log.exists():
        print(
            f"bench: error: no {audit_log}: the local cluster predates audit logging; "
            "restart it (make cluster-down; make cluster)",
            file=sys.stderr,
        )
        return 1
    this = Run(args)
    async with Kube(load_credentials(CLUSTER_DIR / "kubeconfig")) as kube:
        bench = Bench(kube, progress_every=this.sizes.progress_every, defer_deletion=this.quick)
        bench.log(f"{'quick' if this.quick else 'full'} run: {this.sizes}")
        await ceiling.ensure_identity(kube)
        try:
            async with lock.exclusive(kube):
                await this.execute(bench)
        except (lock.BenchBusy, OverriddenConfig) as exc:
            print(f"bench: error: {exc}", file=sys.stderr)
            return 1
    this.write()
    return 0 if all_produced_numbers(this.rounds) else 1


def all_produced_numbers(rounds: dict[str, list[Round]]) -> bool:
    """Every scenario and arm of every setting has at least one round with figures."""
    groups: dict[tuple[str, str, Arm], bool] = {}
    for setting, rs in rounds.items():
        for r in rs:
            key = (setting, r.scenario, r.arm)
            groups[key] = groups.get(key, False) or (r.error is None and bool(r.metrics))
    return all(groups.values())


def main(argv: Sequence[str] | None = None) -> int:
    return asyncio.run(run(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
