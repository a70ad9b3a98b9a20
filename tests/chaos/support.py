"""What every chaos test checks: one kwok job run to the end through a disruption, with
exact final counts, never more than ``parallelism`` active pods, no tracking finalizer
left, no pod counted twice; and the time from the end of a disruption until the
operator creates its next pod (its recovery)."""

from __future__ import annotations

import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.e2e.support import JOB_LABEL, Kubectl, PodWatch, held, is_active, kwok_template, phase
from tests.support.background import Background
from tests.support.wait import wait_until

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Run:
    name: str
    completions: int
    parallelism: int
    duration: str = "1s"


@dataclass
class ActiveSampler(Background):
    """Counts the job's active pods in a consistent snapshot (a LIST) every
    ``interval`` seconds, through outages, and remembers every sample above
    ``parallelism``. (Comparing events of two different watches is not a snapshot.)"""

    core_v1: Any
    namespace: str
    job: str
    parallelism: int
    interval: float = 0.25
    samples: int = 0
    max_active: int = 0
    violations: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _run(self) -> None:
        selector = f"{JOB_LABEL}={self.job}"
        while not self._stop.wait(self.interval):
            try:
                listed = self.core_v1.list_namespaced_pod(self.namespace, label_selector=selector)
            except Exception:  # the API server is down: no sample
                continue
            pods = [self.core_v1.api_client.sanitize_for_serialization(p) for p in listed.items]
            active = sorted(p["metadata"]["name"] for p in pods if is_active(p))
            self.samples += 1
            self.max_active = max(self.max_active, len(active))
            if len(active) > self.parallelism:
                self.violations.append(f"{len(active)} active > {self.parallelism}: {active}")


def start(k: Kubectl, watch: PodWatch, run: Run) -> None:
    k.create_pj(
        run.name,
        kwok_template(run.duration),
        completions=run.completions,
        parallelism=run.parallelism,
    )
    wait_until(lambda: len(watch.created) >= run.parallelism, timeout=60, what="pods created")


def succeeded(watch: PodWatch) -> int:
    return sum(1 for p in watch.snapshot() if phase(p) == "Succeeded")


def reach(watch: PodWatch, n: int, timeout: float = 120) -> None:
    wait_until(lambda: succeeded(watch) >= n, timeout=timeout, what=f"{n} pods succeeded")


def finished(k: Kubectl, name: str) -> str | None:
    """k.finished, None while the API server does not answer."""
    try:
        return k.finished(name)
    except subprocess.CalledProcessError:
        return None


def recovery_after(watch: PodWatch, since: float, timeout: float = 120) -> float:
    """Seconds from ``since`` (time.monotonic()) until the watch shows a new pod."""
    first = wait_until(
        lambda: next((t for t in watch.created_at if t > since), None),
        timeout=timeout,
        what="the operator's next pod",
    )
    return first - since


def restart_component(name: str, down: float = 0) -> float:
    """hack/cluster-restart.sh; returns when the component answers again."""
    subprocess.run(
        [str(REPO_ROOT / "hack" / "cluster-restart.sh"), name, "--down", str(down)],
        check=True,
        timeout=down + 180,
    )
    return time.monotonic()


def assert_exact(
    k: Kubectl, watch: PodWatch, sampler: ActiveSampler, run: Run, timeout: float = 300
) -> None:
    wait_until(lambda: finished(k, run.name), timeout=timeout, what=f"{run.name} finished")
    status = k.status(run.name)
    pods = k.pods(run.name)
    assert finished(k, run.name) == "Complete", status
    done = [p for p in pods if phase(p) == "Succeeded"]
    assert status["succeeded"] == len(done) == run.completions, "each pod counted once"
    assert status.get("failed", 0) == sum(1 for p in pods if phase(p) == "Failed") == 0
    assert held(pods) == [], "no tracking finalizer left"
    assert watch.errors == [], watch.errors[:5]
    assert sampler.samples > 0
    assert sampler.violations == [], sampler.violations[0][:300]
