"""Exactly once through pauses and takeovers (issue 34), with two operator processes
electing a leader on a Lease: each way a replica can be stale, on the local cluster.

* the leader stopped (SIGSTOP) past its Lease, then resumed, several rounds: the
  standby takes over, and the old leader writes nothing once the new one holds the
  Lease (the API server's audit log shows every write of either, by its user agent);
* the standby stopped while the leader works, then handed the Lease (the leader
  stopped gracefully) and resumed: it takes over with caches that missed the leader's
  last writes, and must catch up before it acts.

Each run asserts exact counts, no pod created beyond completions (none fails here), never
more than ``parallelism`` active pods in any snapshot, and no finalizer left.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import LEASE, Operator, Pair, cleanup, operator_env, running_pair
from tests.e2e.support import Kubectl, PodWatch, kubectl, kwok_template
from tests.support import audit
from tests.support.wait import wait_until

from .support import REPO_ROOT, ActiveSampler, Run, assert_exact, finished, start

pytestmark = [pytest.mark.chaos, pytest.mark.localcluster, pytest.mark.kwok]

AUDIT_LOG = REPO_ROOT / ".cluster" / "logs" / "audit.log"
#: The service account the operators of these tests act as: the audit policy
#: (hack/cluster/audit-policy.yaml) records its requests, and no other test uses it.
AUDITED_NAMESPACE = "paralleljob-audited"
AUDITED_USER = f"system:serviceaccount:{AUDITED_NAMESPACE}:operator"
#: Rounds of pause and resume: `make chaos` runs the issue's 10, `make test` 2 (each
#: is some 40 s on the exclusive pass's critical path).
ROUNDS = int(os.environ.get("CHAOS_PAUSE_ROUNDS", "2"))
#: Past the 9 s Lease: the standby takes over, then the leader resumes.
PAUSE_SECONDS = 25.0
WRITES = frozenset({"create", "update", "patch", "delete", "deletecollection"})


def _audited_kubeconfig(path: Path) -> Path:
    """A kubeconfig for the audited service account (cluster-admin: the operator's
    own RBAC is tested elsewhere), beside the local cluster's."""
    manifest = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": AUDITED_NAMESPACE}},
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "operator", "namespace": AUDITED_NAMESPACE},
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "paralleljob-audited-operator"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "cluster-admin",
                },
                "subjects": [
                    {"kind": "ServiceAccount", "name": "operator", "namespace": AUDITED_NAMESPACE}
                ],
            },
        ],
    }
    kubectl("apply", "-f", "-", input=json.dumps(manifest))
    token = kubectl(
        "create", "token", "operator", "-n", AUDITED_NAMESPACE, "--duration=2h"
    ).stdout.strip()
    view = json.loads(kubectl("config", "view", "--raw", "--minify", "-o", "json").stdout)
    cluster = view["clusters"][0]["cluster"]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": cluster}],
        "users": [{"name": "audited", "user": {"token": token}}],
        "contexts": [{"name": "audited", "context": {"cluster": "local", "user": "audited"}}],
        "current-context": "audited",
    }
    path.write_text(json.dumps(config))
    return path


@pytest.fixture
def audited_pair(crd: None, namespace: str, tmp_path: Path) -> Iterator[Pair]:
    """Two candidates acting as the audited service account."""
    kubeconfig = _audited_kubeconfig(tmp_path / "audited.kubeconfig")
    yield from running_pair(Pair(namespace, tmp_path, KUBECONFIG=str(kubeconfig)), namespace)


def test_one_replica_opens_one_watch_per_kind(
    crd: None, namespace: str, tmp_path: Path, k: Kubectl
) -> None:
    """Counted in the API server's audit log: the watches the audited operator opened in
    its namespace, by resource, while it ran a job (a watch ends after 5 minutes, so
    each is opened once in this time). Before issue 34, kopf watched every kind of job
    beside the operator's informers: two per kind of job; until issue 43 it watched the
    ParallelCronJobs. Now every watch is an informer's, and kopf opens none."""
    kubeconfig = _audited_kubeconfig(tmp_path / "audited.kubeconfig")
    cursor = audit.AuditCursor(AUDIT_LOG)
    op = Operator(namespace, tmp_path, operator_env(KUBECONFIG=str(kubeconfig)))
    op.start()
    try:
        k.create_pj("watched", kwok_template("1s"), completions=2, parallelism=2)
        wait_until(lambda: k.finished("watched"), timeout=60, what="the job done")
    finally:
        cleanup(op, namespace)
        op.stop()
    watches = [
        e for e in _audited(cursor, namespace, stage="ResponseStarted") if e["verb"] == "watch"
    ]
    opened = Counter(e["objectRef"]["resource"] for e in watches)
    print(f"\nwatches opened by one replica: {dict(opened)}")
    expected = {"pods": 1, "paralleljobs": 1, "jobs": 1, "parallelcronjobs": 1}
    if k.run("get", "crd", "workloads.kueue.x-k8s.io", check=False).returncode == 0:
        expected["workloads"] = 1  # Kueue installed: the Workloads' informer too
    assert opened == expected, opened
    by_kopf = [e["objectRef"]["resource"] for e in watches if "kopf" in e.get("userAgent", "")]
    assert by_kopf == [], "kopf watches no resource"


def _identity(op: Operator) -> str:
    return str(op.env["POD_NAME"])


def _held_by(k: Kubectl, identity: str) -> bool:
    got = k.run("get", "lease", LEASE, "-o", "json", check=False)
    return got.returncode == 0 and json.loads(got.stdout)["spec"].get("holderIdentity") == identity


def _audited(
    cursor: audit.AuditCursor, namespace: str, stage: str = "ResponseComplete"
) -> list[dict[str, Any]]:
    """The audited operators' requests in ``namespace`` (pods, jobs, events, the Lease)
    at ``stage`` (a watch's ResponseStarted: when it was opened), as the API server
    logged them."""
    events = []
    for line in cursor.lines():
        if AUDITED_USER not in line or f'"{stage}"' not in line:
            continue
        event = json.loads(line)
        ref = event.get("objectRef") or {}
        if event.get("stage") == stage and ref.get("namespace") == namespace:
            events.append(event)
    return events


def _late_writes(events: list[dict[str, Any]], old: str, new: str) -> list[str]:
    """The old leader's successful writes the API server received after it had
    completed the new leader's first write of the Lease (its takeover)."""

    def by(event: dict[str, Any], identity: str) -> bool:
        return str(event.get("userAgent", "")).endswith(f"/{identity}")

    def succeeded(event: dict[str, Any]) -> bool:
        return int((event.get("responseStatus") or {}).get("code", 0)) < 400

    takeovers = [
        audit.parse_time(e["stageTimestamp"])
        for e in events
        if by(e, new)
        and e["verb"] in ("update", "create")
        and e["objectRef"].get("resource") == "leases"
        and succeeded(e)
    ]
    assert takeovers, f"no Lease write by {new} in the audit log"
    took: datetime = min(takeovers)
    return [
        f"{e['verb']} {e['objectRef'].get('resource')}/{e['objectRef'].get('name', '')} "
        f"at {e['requestReceivedTimestamp']} (lease taken {took.isoformat()})"
        for e in events
        if by(e, old)
        and e["verb"] in WRITES
        and succeeded(e)
        and audit.parse_time(e["requestReceivedTimestamp"]) >= took
    ]


def _pause_past_the_lease(pair: Pair, k: Kubectl) -> tuple[Operator, Operator]:
    """The leader stopped until the standby holds the Lease and PAUSE_SECONDS have
    passed, then resumed; returns (old, new) once the old one has exited."""
    leader = wait_until(lambda: pair.leader(k), timeout=60, what="a leader")
    standby = pair.other(leader)
    leader.freeze()
    stopped = time.monotonic()
    try:
        wait_until(
            lambda: _held_by(k, _identity(standby)), timeout=60, what="the standby took over"
        )
        remaining = PAUSE_SECONDS - (time.monotonic() - stopped)
        if remaining > 0:
            # The pause itself, not a synchronisation: how long the leader stays stopped.
            time.sleep(remaining)
    finally:
        leader.thaw()
    assert leader.proc is not None
    code = leader.proc.wait(timeout=30)
    assert code == 1, f"the deposed leader exits with status 1, not {code}"
    return leader, standby


@pytest.mark.long
def test_a_leader_paused_past_its_lease_writes_nothing_when_it_resumes(
    audited_pair: Pair, k: Kubectl, core_v1: Any
) -> None:
    # At most 5 one-second pods a second: more than the rounds can finish, so every
    # pause stops a leader at work.
    run = Run("paused", completions=150 * ROUNDS, parallelism=5, duration="1s")
    late: list[str] = []
    paused = 0
    with (
        PodWatch(core_v1, k.ns, run.name, survive_outages=True) as watch,
        ActiveSampler(core_v1, k.ns, run.name, run.parallelism) as sampler,
    ):
        start(k, watch, run)
        while paused < ROUNDS and not finished(k, run.name):
            cursor = audit.AuditCursor(AUDIT_LOG)
            old, new = _pause_past_the_lease(audited_pair, k)
            paused += 1
            late += _late_writes(_audited(cursor, k.ns), _identity(old), _identity(new))
            old.start()  # as the kubelet restarts it: a standby now
        assert_exact(k, watch, sampler, run)
    assert paused == ROUNDS, f"the job finished after {paused} of {ROUNDS} rounds"
    assert late == [], f"{len(late)} writes by a deposed leader: {late[:5]}"
    assert len(watch.created) == run.completions, "no pod created twice"


def test_a_standby_stopped_then_handed_the_lease_catches_up_before_it_acts(
    audited_pair: Pair, k: Kubectl, core_v1: Any
) -> None:
    """The standby's caches miss everything the leader did while it was stopped; the
    leader then hands the Lease over (SIGTERM: it releases it) and the standby resumes.

    On this small cluster the resumed standby's watches usually bring what they missed
    before its first sync even without the catch-up (their events wait in the sockets,
    read as soon as it runs), so this run checks the whole takeover, not the race:
    tests/unit/runtime/test_caches.py's takeover tests are the ones that fail without it."""
    run = Run("handed", completions=120, parallelism=5, duration="1s")
    with (
        PodWatch(core_v1, k.ns, run.name, survive_outages=True) as watch,
        ActiveSampler(core_v1, k.ns, run.name, run.parallelism) as sampler,
    ):
        start(k, watch, run)
        leader = wait_until(lambda: audited_pair.leader(k), timeout=60, what="a leader")
        standby = audited_pair.other(leader)
        standby.freeze()
        try:
            created = len(watch.created)
            wait_until(
                lambda: len(watch.created) >= created + 20,
                timeout=60,
                what="the leader's work while the standby is stopped",
            )
            leader.stop()  # graceful: the Lease is released for the standby
        finally:
            standby.thaw()
        wait_until(
            lambda: _held_by(k, _identity(standby)), timeout=30, what="the standby took over"
        )
        leader.start()
        assert_exact(k, watch, sampler, run)
    assert len(watch.created) == run.completions, "no pod created twice"
