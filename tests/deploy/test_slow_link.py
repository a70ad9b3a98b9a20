"""Exactly once when the leader's link to the API server turns slow (issue 44), with the
operator deployed in-cluster (two replicas) on the local cluster.

Each round: jobs of kwok pods run; the leader's traffic for the API server goes through
a relay of the test's own (tests/support/slow_link.py), which then holds each chunk for
SLOW_LINK_SECONDS: the leader's renewals stop arriving, it gives up at its renew
deadline and the standby takes over, while writes it sent with its fence still open
(pod creates, status patches, finalizer patches) reach the API server one by one, long
after. Those must be refused where they land (manifests/fence-policy.yaml): the API
server's audit log shows no write of the old leader admitted after the new leader named
itself in the Fence, and every job's counts are exact with never more than
``parallelism`` pods active. Without the policy, some rounds end with pods nobody
expected. SLOW_LINK_ROUNDS rounds (make test: 1; make chaos: 10)."""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest
from kubernetes import client, config

from tests.chaos.support import ActiveSampler, Run, finished
from tests.e2e.support import Kubectl as JobKubectl
from tests.e2e.support import kwok_template, phase
from tests.support.audit import AuditCursor, parse_time
from tests.support.slow_link import SlowRelay, slow_link
from tests.support.wait import wait_until

from .conftest import (
    LEASE,
    REPO,
    SYSTEM_NAMESPACE,
    WATCHED,
    Kubectl,
    fenced_holder,
    fenced_leader,
)

pytestmark = [pytest.mark.localcluster, pytest.mark.chaos, pytest.mark.kwok]

ROUNDS = int(os.environ.get("SLOW_LINK_ROUNDS", "1"))
DELAY = float(os.environ.get("SLOW_LINK_SECONDS", "12"))
POD_NAME = "authentication.kubernetes.io/pod-name"
AUDIT_LOG = REPO / ".cluster" / "logs" / "audit.log"
WRITES = {"create", "update", "patch", "delete", "deletecollection"}
JOBS, COMPLETIONS, PARALLELISM = 2, 40, 4


@dataclass
class Round:
    old: str
    new: str
    takeover_s: float
    #: The old leader's writes received after the new leader named itself in the Fence:
    #: admitted (must be none) and refused.
    admitted_late: list[str]
    refused_late: int
    #: Of the old leader's writes, admitted between the new leader's Lease write and
    #: its Fence write (the window the Fence leaves).
    admitted_between: int


def _service(kubectl: Kubectl) -> tuple[str, int]:
    svc = kubectl.json("-n", "default", "get", "service", "kubernetes")["spec"]
    return svc["clusterIP"], int(svc["ports"][0]["port"])


def _endpoint(kubectl: Kubectl) -> tuple[str, int]:
    [sliced] = kubectl.json(
        "-n", "default", "get", "endpointslices", "-l", "kubernetes.io/service-name=kubernetes"
    )["items"]
    return sliced["endpoints"][0]["addresses"][0], int(sliced["ports"][0]["port"])


def _renewed_through(kubectl: Kubectl, relay: SlowRelay, since: str) -> bool:
    """The leader renewed its Lease after its connections were cut: through the relay."""
    lease = kubectl.json("-n", SYSTEM_NAMESPACE, "get", "lease", LEASE)["spec"]
    return relay.accepted > 0 and lease.get("renewTime", "") > since


def _pod_of(event: dict[str, Any]) -> str:
    return str(((event.get("user") or {}).get("extra") or {}).get(POD_NAME, [""])[0])


def _first_write(events: list[dict[str, Any]], pod: str, resource: str) -> datetime:
    return min(
        parse_time(e["requestReceivedTimestamp"])
        for e in events
        if _pod_of(e) == pod
        and e["verb"] in WRITES
        and (e.get("objectRef") or {}).get("resource") == resource
        and e["responseStatus"]["code"] < 300
    )


def _judge(lines: list[str], old: str, new: str, takeover_s: float) -> Round:
    events = [json.loads(line) for line in lines]
    events = [e for e in events if e.get("stage") == "ResponseComplete"]
    leased = _first_write(events, new, "leases")
    fenced = _first_write(events, new, "fences")
    late_admitted, refused, between = [], 0, 0
    for e in events:
        ref = e.get("objectRef") or {}
        if _pod_of(e) != old or e["verb"] not in WRITES or ref.get("resource") == "leases":
            continue
        received, code = parse_time(e["requestReceivedTimestamp"]), e["responseStatus"]["code"]
        if received > fenced:
            if code < 300:
                late_admitted.append(
                    f"{e['verb']} {ref.get('resource')}/{ref.get('subresource', '')} "
                    f"{ref.get('name', '')} at {e['requestReceivedTimestamp']} ({code})"
                )
            elif code == 403:
                refused += 1
        elif received > leased and code < 300:
            between += 1
    return Round(old, new, takeover_s, late_admitted, refused, between)


def _start_jobs(k: JobKubectl, round_no: int) -> list[Run]:
    runs = [Run(f"slow-{round_no}-{i}", COMPLETIONS, PARALLELISM, "1s") for i in range(JOBS)]
    for run in runs:
        k.create_pj(
            run.name,
            kwok_template(run.duration),
            completions=run.completions,
            parallelism=run.parallelism,
        )
    return runs


def _assert_exact(k: JobKubectl, run: Run) -> None:
    wait_until(lambda: finished(k, run.name), timeout=300, what=f"{run.name} finished")
    status, pods = k.status(run.name), k.pods(run.name)
    assert finished(k, run.name) == "Complete", status
    done = [p for p in pods if phase(p) == "Succeeded"]
    assert status["succeeded"] == len(done) == run.completions, "each pod counted once"
    assert len(pods) == run.completions, [p["metadata"]["name"] for p in pods]
    assert status.get("failed", 0) == 0, status


def _one_round(kubectl: Kubectl, k: JobKubectl, core: Any, round_no: int) -> Round:
    leader_pod, standby = wait_until(
        lambda: fenced_leader(kubectl), timeout=180, what="two replicas, the Fence naming one"
    )
    leader, ip = leader_pod["metadata"]["name"], leader_pod["status"]["podIP"]
    cursor = AuditCursor(AUDIT_LOG)
    endpoint = _endpoint(kubectl)
    with SlowRelay(endpoint[0], endpoint) as relay:
        cut_at = kubectl.json("-n", SYSTEM_NAMESPACE, "get", "lease", LEASE)["spec"]["renewTime"]
        with slow_link(leader, ip, _service(kubectl), relay):
            wait_until(
                lambda: _renewed_through(kubectl, relay, cut_at),
                timeout=30,
                what="the leader renewing through the relay",
            )
            runs = _start_jobs(k, round_no)
            with contextlib.ExitStack() as stack:
                samplers = [
                    stack.enter_context(ActiveSampler(core, WATCHED, run.name, run.parallelism))
                    for run in runs
                ]
                wait_until(
                    lambda: sum(len(k.pods(r.name)) for r in runs) >= 2 * JOBS * PARALLELISM,
                    timeout=60,
                    what="the leader creating pods through the relay",
                )
                relay.delay = DELAY
                slowed = time.monotonic()
                wait_until(
                    lambda: fenced_holder(kubectl) == standby,
                    timeout=120,
                    what=f"{standby} taking over, named in the Fence",
                )
                takeover_s = time.monotonic() - slowed
                for run in runs:
                    _assert_exact(k, run)
            for sampler in samplers:
                assert sampler.samples > 0
                assert sampler.violations == [], sampler.violations[0][:300]
    # The old leader's pod goes: a fresh one stands by for the next round (its
    # container's restarts would back off ever longer).
    kubectl.run("-n", SYSTEM_NAMESPACE, "delete", "pod", leader, "--wait=false")
    for run in runs:
        k.run("delete", "pj", run.name, "--wait=false")
    return _judge(cursor.lines(), leader, standby, takeover_s)


def test_a_slow_link_lands_no_write_of_the_old_leader(deployed: Kubectl, watched: str) -> None:
    k = JobKubectl(watched)
    core = client.CoreV1Api(config.new_client_from_config(config_file=deployed.kubeconfig))
    rounds = [_one_round(deployed, k, core, n) for n in range(ROUNDS)]
    for r in rounds:
        print(
            f"\nslow link: {r.old} -> {r.new} in {r.takeover_s:.1f} s; the old leader's "
            f"writes refused after the Fence moved: {r.refused_late}, admitted between "
            f"the Lease write and the Fence write: {r.admitted_between}"
        )
    late = [w for r in rounds for w in r.admitted_late]
    assert late == [], late[:10]
