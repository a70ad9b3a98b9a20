"""High availability (issue 9, part 3) with two real operator processes electing a
leader on a Lease in the test namespace: the failover time after the leader is
SIGKILLed, and a 500-pod run through which the leader is SIGKILLed every few seconds
with nothing created or counted twice."""

from __future__ import annotations

import random
import time
from typing import Any

import pytest

from tests.support.wait import wait_until

from .conftest import Pair
from .support import Kubectl, PodWatch, held, kwok_template, phase

pytestmark = [pytest.mark.kwok]


def _created_after(watch: PodWatch, since: float) -> float:
    first = wait_until(
        lambda: next((t for t in watch.created_at if t > since), None),
        timeout=60,
        interval=0.05,
        what="a pod created by the new leader",
    )
    return first - since


def _fence_holder(k: Kubectl) -> str:
    fence = k.json("get", "fences.paralleljob.dev", "paralleljob-operator")
    return str(fence["spec"]["holderIdentity"])


@pytest.mark.parametrize(
    "restarted", [True, False], ids=["process restarted in place", "standby takes over"]
)
def test_failover_after_the_leader_is_sigkilled(
    pair: Pair, k: Kubectl, core_v1: Any, restarted: bool
) -> None:
    name = "failover"
    with PodWatch(core_v1, k.ns, name) as watch:
        k.create_pj(name, kwok_template("1s"), completions=40, parallelism=5)
        wait_until(lambda: len(watch.created) >= 5, timeout=60, what="the first pods")
        leader = wait_until(lambda: pair.leader(k), timeout=60, what="a leader")
        leader.kill()
        killed = time.monotonic()
        if restarted:  # as the kubelet restarts a crashed container: same pod name
            leader.start()
        failover = _created_after(watch, killed)
        new = pair.leader(k)
        print(f"\nfailover ({'restarted' if restarted else 'standby'}): {failover:.1f} s")
        # Restarted in place, the process hands its pod's lease over to the standby,
        # whose caches are in sync, rather than wait for the lease to expire.
        assert new is pair.other(leader)
        # The new leader named itself where an admission policy would judge writes by.
        [new_name] = [n for n, op in pair.ops.items() if op is new]
        assert _fence_holder(k) == new_name
        wait_until(lambda: k.finished(name), timeout=120, what=f"{name} done")
    status = k.status(name)
    assert (status["succeeded"], status.get("failed", 0)) == (40, 0)
    if not restarted:
        leader.start()  # for the fixture's cleanup: both candidates back


@pytest.mark.long
def test_leader_killed_every_few_seconds_through_a_500_pod_run(
    pair: Pair, k: Kubectl, core_v1: Any
) -> None:
    name = "churn"
    chaos = random.Random(5)
    kills = 0
    with PodWatch(core_v1, k.ns, name) as watch:
        k.create_pj(name, kwok_template("2s"), completions=500, parallelism=50)
        while not k.finished(name):
            # The chaos schedule itself: the leader lives 3-6 s between kills.
            time.sleep(chaos.uniform(3, 6))
            leader = pair.leader(k)
            if leader is None or k.finished(name):
                continue
            leader.kill()
            kills += 1
            leader.start()  # restarted in place, or standing by if the other took over
            assert kills < 100, "the job does not finish"
    pods = k.pods(name)
    status = k.status(name)
    succeeded = [p for p in pods if phase(p) == "Succeeded"]
    assert status["succeeded"] == len(succeeded) == 500, "each pod counted once"
    assert status.get("failed", 0) == 0
    assert held(pods) == []
    assert kills >= 3
    assert len(watch.created) == 500, "no pod created twice"
