"""The operator's ServiceAccount may do exactly what docs/deploy.md documents."""

from __future__ import annotations

import json

import pytest

from tests.support.docs import NAMESPACE_RBAC, Rule
from tests.support.docs import documented_rbac as documented
from tests.support.wait import wait_until

from .conftest import SERVICE_ACCOUNT, SYSTEM_NAMESPACE, Kubectl

pytestmark = [pytest.mark.cluster]

OPERATOR = f"system:serviceaccount:{SYSTEM_NAMESPACE}:{SERVICE_ACCOUNT}"


def can_i_list(kubectl: Kubectl, user: str, namespace: str) -> set[Rule]:
    """`kubectl auth can-i --list` as a set of (resource, verb), resources only."""
    out = kubectl.run("auth", "can-i", "--list", f"--as={user}", "-n", namespace).stdout
    lines = out.splitlines()
    header = lines[0]
    urls_at = header.index("Non-Resource URLs")
    verbs_at = header.index("Verbs")
    rules: set[Rule] = set()
    for line in lines[1:]:
        resource = line[:urls_at].strip()
        if not resource:
            continue  # a non-resource URL (discovery, /healthz...), granted to everyone
        verbs = line[verbs_at:].strip().strip("[]").split()
        rules |= {(resource, v) for v in verbs}
    return rules


@pytest.mark.parametrize("namespace_under_test", [SYSTEM_NAMESPACE, "default"])
def test_can_i_list_is_the_documented_set(deployed: Kubectl, namespace_under_test: str) -> None:
    # What every ServiceAccount may do anyway (self-reviews, discovery) is not the operator's.
    baseline = can_i_list(
        deployed, f"system:serviceaccount:{SYSTEM_NAMESPACE}:no-such-account", namespace_under_test
    )
    granted = can_i_list(deployed, OPERATOR, namespace_under_test) - baseline
    # The ClusterRole everywhere; the Role (the leader-election Lease) in its own namespace.
    expected = documented()
    if namespace_under_test == SYSTEM_NAMESPACE:
        expected |= documented(marker=NAMESPACE_RBAC)
    assert granted == expected, (
        f"not documented: {sorted(granted - expected)}; "
        f"documented but not granted: {sorted(expected - granted)}"
    )


@pytest.mark.parametrize("verb", ["get", "list", "watch"])
def test_cannot_read_secrets(deployed: Kubectl, verb: str) -> None:
    for scope in (["-n", SYSTEM_NAMESPACE], ["-n", "default"], ["--all-namespaces"]):
        answer = deployed.run(
            "auth", "can-i", verb, "secrets", f"--as={OPERATOR}", *scope, check=False
        )
        assert answer.stdout.strip() == "no", (verb, scope, answer.stdout, answer.stderr)


def test_users_get_parallel_jobs_through_aggregation(deployed: Kubectl) -> None:
    for role, verbs, not_verbs in (
        ("admin", ["create", "delete", "patch"], []),
        ("edit", ["create", "delete", "patch"], []),
        ("view", ["get", "list", "watch"], ["create", "delete", "patch"]),
    ):

        def aggregated(role: str = role, wanted: frozenset[str] = frozenset(verbs)) -> set[str]:
            """The role's verbs on paralleljobs once they include ``wanted``, else empty."""
            rules = deployed.json("get", "clusterrole", role).get("rules") or []
            granted = {
                v for r in rules if "paralleljobs" in r.get("resources", []) for v in r["verbs"]
            }
            return granted if wanted <= granted else set()

        # The aggregation controller fills the built-in roles asynchronously.
        pj = wait_until(aggregated, timeout=30, what=f"ParallelJob rules aggregated into {role}")
        assert not set(not_verbs) & pj, (role, pj)


# What the operator creates with an owner reference that blocks the owner's deletion:
# (the child's apiVersion, kind, plural), (the owner's apiVersion, kind).
BLOCKING_OWNERS = [
    (("v1", "Pod", "pods"), ("paralleljob.dev/v1alpha1", "ParallelJob")),
    (("v1", "Pod", "pods"), ("batch/v1", "Job")),
    (
        ("paralleljob.dev/v1alpha1", "ParallelJob", "paralleljobs"),
        ("paralleljob.dev/v1alpha1", "ParallelCronJob"),
    ),
]


@pytest.mark.parametrize(
    ("child", "owner"), BLOCKING_OWNERS, ids=[f"{o[1]}-owns-{c[1]}" for c, o in BLOCKING_OWNERS]
)
def test_owner_references_that_block_deletion_are_admitted(
    deployed: Kubectl, child: tuple[str, str, str], owner: tuple[str, str]
) -> None:
    """The clusters here run OwnerReferencesPermissionEnforcement, as hardened ones do: a
    blockOwnerDeletion reference needs update on the owner's finalizers. A server-side
    dry run goes through admission, so nothing is created."""
    (api_version, kind, _), (owner_api_version, owner_kind) = child, owner
    container = {"name": "main", "image": "busybox:1.35.0"}
    pod_spec: dict[str, object] = {"containers": [container], "restartPolicy": "Never"}
    spec = pod_spec if kind == "Pod" else {"template": {"spec": pod_spec}}
    body = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {
            "name": "rbac-blocking-owner",
            "ownerReferences": [
                {
                    "apiVersion": owner_api_version,
                    "kind": owner_kind,
                    "name": "owner",
                    "uid": "00000000-0000-0000-0000-000000000001",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
    }
    result = deployed.run(
        "create", "--dry-run=server", f"--as={OPERATOR}", "-n", "default", "-f", "-",
        input=json.dumps(body), check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
