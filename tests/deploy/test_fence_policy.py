"""The write fence where a write lands (manifests/fence-policy.yaml): the API server
admits the operator's writes only from the pod the Fence names, which the leader names
there once it holds the Lease. Each write here is a server-side dry run (admission runs
on it; nothing is created), made as the operator's service account from a given pod
(impersonated: its token's authentication.kubernetes.io/pod-name)."""

from __future__ import annotations

import copy
import json
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client import ApiException

from tests.support.wait import wait_until

from .conftest import (
    LEASE,
    REPO,
    SERVICE_ACCOUNT,
    SYSTEM_NAMESPACE,
    WATCHED,
    Kubectl,
    fenced_leader,
    parallel_job,
)

OPERATOR = f"system:serviceaccount:{SYSTEM_NAMESPACE}:{SERVICE_ACCOUNT}"
POD_NAME = "authentication.kubernetes.io/pod-name"
POLICY = "paralleljob-operator-fence"


def _pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "fenced-"},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.35.0"}]},
    }


def _dry_run_create(kubectl: Kubectl, *impersonation: str) -> Any:
    return kubectl.run(
        "create", "--dry-run=server", *impersonation, "-n", WATCHED, "-f", "-",
        input=json.dumps(_pod()), check=False,
    )  # fmt: skip


def _from_pod(pod: str) -> tuple[str, str]:
    return f"--as={OPERATOR}", f"--as-user-extra={POD_NAME}={pod}"


def _leader_and_standby(kubectl: Kubectl) -> tuple[str, str] | None:
    """The leader's name and the standby's, once the Fence names the leader."""
    found = fenced_leader(kubectl)
    return (found[0]["metadata"]["name"], found[1]) if found else None


def test_only_the_leaders_writes_are_admitted(deployed: Kubectl) -> None:
    leader, standby = wait_until(
        lambda: _leader_and_standby(deployed),
        timeout=120,
        what="two replicas, the Fence naming the Lease's holder",
    )
    admitted = _dry_run_create(deployed, *_from_pod(leader))
    assert admitted.returncode == 0, admitted.stderr
    refused = _dry_run_create(deployed, *_from_pod(standby))
    assert refused.returncode != 0
    assert (
        f"ValidatingAdmissionPolicy '{POLICY}' with binding '{POLICY}' denied request: "
        f"pod {standby} is not the leader: fence {SYSTEM_NAMESPACE}/{LEASE} names {leader}"
    ) in refused.stderr, refused.stderr
    # The token used outside a pod (no pod name): not judged.
    outside = _dry_run_create(deployed, f"--as={OPERATOR}")
    assert outside.returncode == 0, outside.stderr


# ----------------------------------------------------- the window that remains, measured
WINDOW = "fence-window"
WINDOW_ROUNDS = 10


@pytest.fixture
def window_policy(deployed: Kubectl) -> Iterator[str]:
    """The shipped policy, copied to judge a service account of the test's own by a
    Fence of its own in WATCHED (so that moving that Fence touches no operator)."""
    docs = list(yaml.safe_load_all((REPO / "manifests" / "fence-policy.yaml").read_text()))
    policy, binding = (copy.deepcopy(d) for d in docs)
    name = f"{POLICY}-window-test"
    account = f"system:serviceaccount:{WATCHED}:{WINDOW}"
    policy["metadata"]["name"] = binding["metadata"]["name"] = binding["spec"]["policyName"] = name
    [condition] = policy["spec"]["matchConditions"]
    condition["expression"] = condition["expression"].replace(OPERATOR, account)
    assert account in condition["expression"]
    binding["spec"]["paramRef"] = {
        "name": WINDOW,
        "namespace": WATCHED,
        "parameterNotFoundAction": "Deny",
    }
    namespaced = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": WINDOW}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": WINDOW},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "paralleljob-operator",
            },
            "subjects": [{"kind": "ServiceAccount", "name": WINDOW, "namespace": WATCHED}],
        },
        {
            "apiVersion": "paralleljob.dev/v1alpha1",
            "kind": "Fence",
            "metadata": {"name": WINDOW},
            "spec": {"holderIdentity": "pod-a", "leaseTransitions": 0},
        },
    ]
    cluster = json.dumps({"apiVersion": "v1", "kind": "List", "items": [policy, binding]})
    local = json.dumps({"apiVersion": "v1", "kind": "List", "items": namespaced})
    deployed.run("apply", "-f", "-", input=cluster)
    deployed.run("-n", WATCHED, "apply", "-f", "-", input=local)
    try:
        yield WINDOW
    finally:
        deployed.run("delete", "-f", "-", "--ignore-not-found", input=cluster)
        deployed.run("-n", WATCHED, "delete", "-f", "-", "--ignore-not-found", input=local)


def _as_pod(kubeconfig: str, pod: str) -> Any:
    api = config.new_client_from_config(config_file=kubeconfig)
    api.set_default_header("Impersonate-User", f"system:serviceaccount:{WATCHED}:{WINDOW}")
    api.set_default_header(f"Impersonate-Extra-{urllib.parse.quote(POD_NAME, safe='')}", pod)
    return client.CoreV1Api(api)


def _admitted(api: Any) -> bool:
    try:
        api.create_namespaced_pod(WATCHED, _pod(), dry_run="All")
    except ApiException as exc:
        assert exc.status == 403 and POLICY in str(exc.body), exc
        return False
    return True


def _move(fences: Any, name: str, holder: str) -> float:
    """The Fence made to name ``holder``; the time its write was answered."""
    fences.patch_namespaced_custom_object(
        "paralleljob.dev", "v1alpha1", WATCHED, "fences", name, {"spec": {"holderIdentity": holder}}
    )
    return time.monotonic()


def _first_refusal(api: Any, since: float) -> tuple[float, int]:
    """Writes in a loop until one is refused: the seconds from ``since`` to the last one
    admitted that was sent after it (0: none was), and how many those were."""
    last_admitted, admitted = since, 0
    deadline = since + 10
    while time.monotonic() < deadline:
        sent = time.monotonic()
        if not _admitted(api):
            return last_admitted - since, admitted
        last_admitted, admitted = sent, admitted + 1
    raise AssertionError("a write from the old holder was still admitted 10 s after the move")


def _settle(api: Any, *, admitted: bool) -> None:
    """Until the API server's cache of the Fence says what the last move said."""
    wait_until(lambda: _admitted(api) == admitted, timeout=10, interval=0.05, what="the move")


def test_the_window_after_a_takeover_is_the_api_servers_cache_of_the_fence(
    deployed: Kubectl, window_policy: str
) -> None:
    """The Fence moves from pod-a to pod-b; pod-a then writes as fast as it can. Every
    write sent after the Fence's write was answered is judged by the API server's cache
    of the Fence, which may lag it: the time from the move to the last write of pod-a
    admitted is the window that remains (printed; docs/operations.md)."""
    old, new = _as_pod(deployed.kubeconfig, "pod-a"), _as_pod(deployed.kubeconfig, "pod-b")
    fences = client.CustomObjectsApi(config.new_client_from_config(config_file=deployed.kubeconfig))
    windows: list[tuple[float, int]] = []
    for _ in range(WINDOW_ROUNDS):
        _settle(old, admitted=True)
        windows.append(_first_refusal(old, _move(fences, window_policy, "pod-b")))
        _settle(new, admitted=True)
        _move(fences, window_policy, "pod-a")
    # _first_refusal fails the test should the old holder's writes go on being admitted.
    figures = ", ".join(f"{w * 1000:.0f} ms ({n})" for w, n in windows)
    print(f"\nfence window after the Fence moved (old holder's writes admitted): {figures}")


# ----------------------------------------------- one replica, without leader election
@pytest.fixture
def alone(deployed: Kubectl) -> Iterator[Kubectl]:
    """The Deployment at one replica with PJ_LEADER_ELECT=false; as shipped afterwards."""
    deployment = ("-n", SYSTEM_NAMESPACE, "deployment/paralleljob-operator")
    try:
        deployed.run("set", "env", *deployment, "PJ_LEADER_ELECT=false")
        deployed.run("scale", *deployment, "--replicas=1")
        deployed.run("rollout", "status", *deployment, "--timeout=180s", timeout=200)
        yield deployed
    finally:
        deployed.run("set", "env", *deployment, "PJ_LEADER_ELECT=true")
        deployed.run("scale", *deployment, "--replicas=2")
        deployed.run("rollout", "status", *deployment, "--timeout=180s", timeout=200)
        wait_until(
            lambda: _leader_and_standby(deployed),
            timeout=120,
            what="two replicas again, the Fence naming the leader",
        )


def _fence_exists(kubectl: Kubectl) -> bool:
    got = kubectl.run("-n", SYSTEM_NAMESPACE, "get", "fences.paralleljob.dev", LEASE, check=False)
    return got.returncode == 0


def test_one_replica_without_leader_election_deletes_the_fence_and_writes(alone: Kubectl) -> None:
    """The Fence an elected leader left would refuse every write of a replica it does not
    name: a replica without an election deletes it at start-up, and its pods run."""
    wait_until(lambda: not _fence_exists(alone), timeout=60, what="the Fence deleted")
    name = "alone"
    job = parallel_job(name)
    alone.run("-n", WATCHED, "apply", "-f", "-", input=json.dumps(job))
    try:
        wait_until(
            lambda: (
                alone.json("-n", WATCHED, "get", "pj", name).get("status", {}).get("succeeded") == 2
            ),
            timeout=180,
            what=f"{name} to have 2 succeeded",
        )
    finally:
        alone.run("-n", WATCHED, "delete", "pj", name, "--wait", "--timeout=60s", check=False)
