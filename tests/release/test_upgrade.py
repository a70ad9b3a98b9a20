"""An upgrade from the previous release to this tree's, then a downgrade back, each with
jobs of every kind in flight (issue 45; make test-upgrade: PJ_UPGRADE_FULL=1, larger
jobs and the downgrade; make test: the upgrade, with fewer jobs, in its kind pass).

The previous release (hack/previous-release.env: a commit of this repository, built
from a worktree by hack/release.sh --previous) is installed with two replicas from its
one manifest. While ParallelJobs (plain, Indexed, using job-level restarts, suspended),
a batch/v1 Job through managedBy and a ParallelCronJob every minute run, this tree's
manifest is applied (`kubectl apply --server-side`, the user's upgrade): the Deployment
replaces its replicas, the Lease goes to a new one. Then back:
the fence policy's binding deleted (docs/operations.md says why), the previous manifest
applied. Throughout, one watch of the namespace's pods checks that no job ever has more
pods active than its parallelism; at the end every job's counts are exact, no job has a
pod more than it needed, none restarted or re-ran, every minute's scheduled run
happened once, and the new replicas (both at the expected version) hold the Lease."""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config

from tests.deploy.conftest import (
    DEPLOYMENT,
    LEASE,
    SYSTEM_NAMESPACE,
    Kubectl,
    fenced_holder,
    ready_operator_pods,
)
from tests.e2e.support import Kubectl as JobKubectl
from tests.e2e.support import busybox_template
from tests.support.wait import wait_until
from tests.support.warning_events import unexpected_warnings

from .conftest import Release
from .observe import LeaseLog, PodLedger, minute_boundaries

pytestmark = [pytest.mark.long]

NAMESPACE = "pj-upgrade-test"
FULL = os.environ.get("PJ_UPGRADE_FULL") == "1"
#: completions, parallelism and each pod's seconds of a job; job-level restarts.
COMPLETIONS, PARALLELISM, SECONDS = (24, 4, 5) if FULL else (4, 2, 3)
RESTARTS = 3 if FULL else 1
SCHEDULED_ANNOTATION = "batch.kubernetes.io/cronjob-scheduled-timestamp"
#: The Warning Events this test causes on purpose (the restarting job's).
EXPECTED_WARNINGS = {"Restarted", "BackoffLimitExceeded"}
#: A previous release's Warnings that are its known bugs, fixed since (CHANGELOG.md):
#: 0.0.0 judged a ParallelCronJob's new run unexpected on its caches alone (its view of
#: the cron job's status behind its view of the run); 0.1.0 reads both live first, as
#: upstream does.
PREVIOUS_NOISE = {"0.0.0": {"UnexpectedJob"}}
#: How long after a minute's start its scheduled run must exist.
SCHEDULE_GRACE = timedelta(seconds=20)


@dataclass
class Work:
    """A job started before a replacement of the operator, and what it must end as."""

    name: str
    kind: str  # "pj" or "job"
    spec: dict[str, Any]
    verdict: str
    pods: int
    uid: str = ""
    checks: list[str] = field(default_factory=list)


def _works(prefix: str) -> list[Work]:
    sleep = busybox_template(f"sleep {SECONDS}")
    failing = busybox_template(f"sleep {SECONDS}; exit 1")
    plain = {"completions": COMPLETIONS, "parallelism": PARALLELISM, "template": sleep}
    return [
        Work(f"{prefix}-plain", "pj", plain, "Complete", COMPLETIONS),
        Work(
            f"{prefix}-indexed",
            "pj",
            {**plain, "completionMode": "Indexed"},
            "Complete",
            COMPLETIONS,
        ),
        Work(
            f"{prefix}-job",
            "job",
            {**plain, "managedBy": "paralleljob.dev/job-controller"},
            "Complete",
            COMPLETIONS,
        ),
        Work(
            f"{prefix}-restarts",
            "pj",
            {
                "completions": 1,
                "parallelism": 1,
                "backoffLimit": 0,
                "template": failing,
                "restartPolicy": {"maxRestarts": RESTARTS},
            },
            "Failed",
            RESTARTS + 1,
        ),
        Work(f"{prefix}-suspended", "pj", {**plain, "suspend": True}, "Complete", COMPLETIONS),
    ]


def _body(work: Work) -> dict[str, Any]:
    api = "paralleljob.dev/v1alpha1" if work.kind == "pj" else "batch/v1"
    kind = "ParallelJob" if work.kind == "pj" else "Job"
    return {"apiVersion": api, "kind": kind, "metadata": {"name": work.name}, "spec": work.spec}


def _cron() -> dict[str, Any]:
    return {
        "apiVersion": "paralleljob.dev/v1alpha1",
        "kind": "ParallelCronJob",
        "metadata": {"name": "every-minute"},
        "spec": {
            "schedule": "* * * * *",
            "successfulJobsHistoryLimit": 30,
            "jobTemplate": {
                "spec": {
                    "completions": 2,
                    "parallelism": 2,
                    "template": busybox_template("sleep 2"),
                }
            },
        },
    }


#: What 0.0.0's RBAC lacks where OwnerReferencesPermissionEnforcement is on (as on the
#: test clusters): without it, each of its pod creates is refused (CHANGELOG.md, 0.1.0).
FINALIZERS_RBAC: list[dict[str, Any]] = [
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "paralleljob-operator-0.0.0-finalizers"},
        "rules": [
            {
                "apiGroups": ["paralleljob.dev"],
                "resources": ["paralleljobs/finalizers", "parallelcronjobs/finalizers"],
                "verbs": ["update"],
            },
            {"apiGroups": ["batch"], "resources": ["jobs/finalizers"], "verbs": ["update"]},
        ],
    },
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "paralleljob-operator-0.0.0-finalizers"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "paralleljob-operator-0.0.0-finalizers",
        },
        "subjects": [
            {
                "kind": "ServiceAccount",
                "name": "paralleljob-operator",
                "namespace": SYSTEM_NAMESPACE,
            }
        ],
    },
]


def _install(kubectl: Kubectl, release: Release) -> None:
    """`kubectl apply --server-side -f` of the release's manifest, its operator watching
    NAMESPACE only (an env entry wins over the ConfigMap's); 0.0.0 with FINALIZERS_RBAC."""
    docs = [d for d in yaml.safe_load_all(release.manifest.read_text()) if d]
    if release.version == "0.0.0":
        docs += FINALIZERS_RBAC
    for doc in docs:
        if doc["kind"] == "Deployment" and doc["metadata"]["name"] == DEPLOYMENT:
            [container] = doc["spec"]["template"]["spec"]["containers"]
            container.setdefault("env", []).append(
                {"name": "PJ_WATCH_NAMESPACES", "value": NAMESPACE}
            )
    kubectl.run("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(docs))


def _serving(kubectl: Kubectl, release: Release) -> str | None:
    """The leader's name once the rollout is done: two ready replicas, both of the
    release's image and no other pod left, one of them holding the Lease."""
    pods = kubectl.json(
        "-n", SYSTEM_NAMESPACE, "get", "pods", "-l", "app.kubernetes.io/component=operator"
    )["items"]
    ready = ready_operator_pods(kubectl)
    images = {p["spec"]["containers"][0]["image"] for p in pods}
    if len(pods) != 2 or len(ready) != 2 or images != {release.image}:
        return None
    holder = kubectl.json("-n", SYSTEM_NAMESPACE, "get", "lease", LEASE)["spec"].get(
        "holderIdentity"
    )
    return str(holder) if holder in ready else None


@dataclass(frozen=True)
class Rollout:
    leader: str
    seconds: float
    pods: frozenset[str]


def _replace(kubectl: Kubectl, release: Release) -> Rollout:
    """Applies the release and waits for its replicas to serve."""
    started = time.monotonic()
    _install(kubectl, release)
    leader = wait_until(
        lambda: _serving(kubectl, release),
        timeout=300,
        what=f"both replicas at {release.version}, one leading",
    )
    return Rollout(leader, time.monotonic() - started, frozenset(ready_operator_pods(kubectl)))


def _start(k: JobKubectl, ledger: PodLedger, works: list[Work]) -> None:
    for work in works:
        ledger.limits[work.name] = work.spec["parallelism"]
        k.run("create", "-f", "-", input=json.dumps(_body(work)))
        work.uid = k.json("get", _resource(work), work.name)["metadata"]["uid"]
    running = [w for w in works if not w.spec.get("suspend")]
    wait_until(
        lambda: all(ledger.pods_of(w.uid) > 0 for w in running),
        timeout=120,
        what="every job running its first pods",
    )


def _resource(work: Work) -> str:
    return "paralleljobs.paralleljob.dev" if work.kind == "pj" else "jobs.batch"


def _finished(status: dict[str, Any]) -> str | None:
    for cond in status.get("conditions") or []:
        if cond["type"] in ("Complete", "Failed") and cond["status"] == "True":
            return str(cond["type"])
    return None


def _still_running(k: JobKubectl, works: list[Work]) -> list[str]:
    """The jobs in flight: started, neither finished nor suspended."""
    running = []
    for work in works:
        status = k.json("get", _resource(work), work.name).get("status") or {}
        if not work.spec.get("suspend") and _finished(status) is None:
            running.append(work.name)
    return running


def _judge(k: JobKubectl, ledger: PodLedger, work: Work) -> list[str]:
    """What is wrong with a finished job's end."""
    obj = k.json("get", _resource(work), work.name)
    status, wrong = obj.get("status") or {}, []
    if obj["metadata"]["uid"] != work.uid:
        wrong.append("re-created")
    if _finished(status) != work.verdict:
        wrong.append(f"ended {_finished(status)}, not {work.verdict}")
    if ledger.pods_of(work.uid) != work.pods:
        wrong.append(f"{ledger.pods_of(work.uid)} pods created for {work.pods}")
    if work.verdict == "Complete":
        if status.get("succeeded") != work.spec["completions"] or status.get("failed"):
            wrong.append(
                f"counted {status.get('succeeded')} succeeded, {status.get('failed')} failed"
            )
        if status.get("restarts"):
            wrong.append(f"restarted {status['restarts']} times")
        if work.spec.get("completionMode") == "Indexed" and status.get("completedIndexes") != (
            f"0-{COMPLETIONS - 1}"
        ):
            wrong.append(f"completed indexes {status.get('completedIndexes')}")
    elif status.get("restarts") != RESTARTS or status.get("failed") != 1:
        wrong.append(f"restarts {status.get('restarts')}, failed {status.get('failed')}")
    return [f"{work.name}: {w}" for w in wrong]


def _phase(
    kubectl: Kubectl, k: JobKubectl, ledger: PodLedger, release: Release, prefix: str
) -> tuple[Rollout, list[str]]:
    """Jobs of every kind started, the release applied while they run, all of them run
    to the end; the rollout, and what went wrong."""
    works = _works(prefix)
    _start(k, ledger, works)
    in_flight = _still_running(k, works)
    assert len(in_flight) == len(works) - 1, f"finished before the replacement: {in_flight}"
    rollout = _replace(kubectl, release)
    suspended = next(w for w in works if w.spec.get("suspend"))
    assert ledger.pods_of(suspended.uid) == 0, "a suspended job ran pods"
    k.run(
        "patch",
        _resource(suspended),
        suspended.name,
        "--type=merge",
        "-p",
        '{"spec":{"suspend":false}}',
    )
    suspended.spec = {**suspended.spec, "suspend": False}
    wait_until(
        lambda: not _still_running(k, works),
        timeout=300,
        what=f"{prefix}: every job finished",
    )
    return rollout, [w for work in works for w in _judge(k, ledger, work)]


def _scheduled_runs(k: JobKubectl, cron_uid: str) -> tuple[Counter[datetime], list[str]]:
    """The cron job's runs by scheduled time, and what is wrong with the finished ones."""
    runs: Counter[datetime] = Counter()
    wrong = []
    for pj in k.json("get", "paralleljobs.paralleljob.dev")["items"]:
        owners = [ref["uid"] for ref in pj["metadata"].get("ownerReferences") or []]
        if cron_uid not in owners:
            continue
        at = datetime.fromisoformat(pj["metadata"]["annotations"][SCHEDULED_ANNOTATION])
        runs[at.astimezone(UTC)] += 1
        state = _finished(pj.get("status") or {})
        if state is not None and (state != "Complete" or pj["status"].get("succeeded") != 2):
            wrong.append(f"{pj['metadata']['name']}: {state}, {pj['status']}")
    return runs, wrong


def _warnings(k: JobKubectl, previous: Release, previous_pods: set[str]) -> list[str]:
    """The Warning Events nobody expected (tests/support/warning_events.py): neither this
    test's own, nor the machine's, nor the previous release's known noise."""
    noise = PREVIOUS_NOISE.get(previous.version, set())
    events = [
        e
        for e in k.json("get", "events")["items"]
        if e["reason"] not in noise
        or (e.get("reportingInstance") or e["source"].get("host", "")) not in previous_pods
    ]
    return [str(w) for w in unexpected_warnings({"items": events}, EXPECTED_WARNINGS)]


def _keep_logs(kubectl: Kubectl, into: Path) -> dict[str, str]:
    """Each operator pod's log, kept in ``into`` (its pods are replaced next)."""
    logs = {}
    for pod in ready_operator_pods(kubectl):
        logs[pod] = kubectl.run("-n", SYSTEM_NAMESPACE, "logs", pod, check=False).stdout
        (into / f"{pod}.log").write_text(logs[pod])
    return logs


def _downgrade(
    kubectl: Kubectl, k: JobKubectl, ledger: PodLedger, previous: Release, cron_uid: str
) -> tuple[Rollout, list[str]]:
    """Back to the previous release with jobs in flight (make test-upgrade only), and
    one more scheduled run under it."""
    # The previous release knows no Fence, so the policy that reads it goes first
    # (docs/operations.md, "Upgrades and downgrades").
    kubectl.run("delete", "validatingadmissionpolicybinding", "paralleljob-operator-fence")
    down = _phase(kubectl, k, ledger, previous, "down")
    until = datetime.now(UTC)
    wait_until(
        lambda: max(_scheduled_runs(k, cron_uid)[0], default=until) > until,
        timeout=90,
        what="a scheduled run after the downgrade",
    )
    return down


@pytest.fixture
def namespace(kubectl: Kubectl, undeployed: None) -> Iterator[str]:
    """NAMESPACE, new; afterwards its jobs deleted while an operator still runs (it
    holds their finalizers), then the namespace."""
    kubectl.run("delete", "namespace", NAMESPACE, "--ignore-not-found", "--timeout=120s")
    kubectl.run("create", "namespace", NAMESPACE)
    yield NAMESPACE
    for kind in ("parallelcronjobs.paralleljob.dev", "paralleljobs.paralleljob.dev", "jobs"):
        kubectl.run("-n", NAMESPACE, "delete", kind, "--all", "--timeout=120s", check=False)
    kubectl.run("delete", "namespace", NAMESPACE, "--wait=false", check=False)
    kubectl.run(
        "delete", "-f", "-", "--ignore-not-found", input=yaml.safe_dump_all(FINALIZERS_RBAC)
    )


def test_an_upgrade_and_a_downgrade_lose_nothing_in_flight(
    kubectl: Kubectl, releases: tuple[Release, Release], namespace: str, tmp_path: Path
) -> None:
    previous, current = releases
    api = config.new_client_from_config(config_file=kubectl.kubeconfig)
    k = JobKubectl(namespace)
    first = _replace(kubectl, previous)
    with (
        # The cron job's runs have parallelism 2, as the quick sizes' jobs.
        PodLedger(client.CoreV1Api(api), namespace, default_limit=2) as ledger,
        LeaseLog(client.CoordinationV1Api(api), SYSTEM_NAMESPACE, LEASE) as lease,
    ):
        k.run("create", "-f", "-", input=json.dumps(_cron()))
        cron = k.json("get", "parallelcronjobs.paralleljob.dev", "every-minute")["metadata"]
        created = datetime.fromisoformat(cron["creationTimestamp"])
        up, up_wrong = _phase(kubectl, k, ledger, current, "up")
        up_handovers = lease.takeovers()
        fenced = fenced_holder(kubectl)
        versions = {
            pod: f"starting paralleljob-operator {current.version}" in log
            for pod, log in _keep_logs(kubectl, tmp_path).items()
        }
        down, down_wrong = (
            _downgrade(kubectl, k, ledger, previous, cron["uid"]) if FULL else (None, [])
        )
        runs, runs_wrong = _scheduled_runs(k, cron["uid"])
        expected = minute_boundaries(created, datetime.now(UTC) - SCHEDULE_GRACE)
        _keep_logs(kubectl, tmp_path)
    print(
        f"\nupgrade {previous.version} -> {current.version} in {up.seconds:.0f} s "
        f"({up_handovers} hand-over)"
        f"{f', downgrade in {down.seconds:.0f} s' if down else ''}; "
        f"{lease.takeovers()} hand-overs, no leader for "
        f"{', '.join(f'{s:.1f}' for s in lease.leaderless_s())} s; "
        f"{sum(len(p) for p in ledger.created.values())} pods; "
        f"{len(runs)} scheduled runs ({min(runs, default=created):%H:%M}-"
        f"{max(runs, default=created):%H:%M})"
    )
    assert up_wrong == [] and down_wrong == [], up_wrong + down_wrong
    assert ledger.violations == [], ledger.violations[:5]
    assert ledger.errors == [], ledger.errors[:5]
    assert fenced == up.leader, "the Fence names the new leader"
    assert list(versions.values()) == [True, True], f"start-up logs: {versions}"
    doubled = {at: n for at, n in runs.items() if n > 1}
    assert doubled == {}, f"scheduled runs doubled: {doubled}"
    assert expected <= set(runs), f"scheduled runs missed: {sorted(expected - set(runs))}"
    assert runs_wrong == [], runs_wrong
    warnings = _warnings(k, previous, set(first.pods | (down.pods if down else set())))
    assert warnings == [], warnings
