"""The operator installed in-cluster from its image, once per session.

``deployed`` runs ``make deploy-local`` (image build, import into the node,
``kubectl apply -k manifests/``, rollout) once; docker's layer cache and the
content-addressed tag make a repeat cheap. When the last test of this
directory is done it is undeployed again, so that tests elsewhere never meet
a second operator; a CRD that was installed before the session is left installed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.wait import wait_until

REPO = Path(__file__).resolve().parents[2]
SYSTEM_NAMESPACE = "paralleljob-system"
SERVICE_ACCOUNT = "paralleljob-operator"
DEPLOYMENT = "paralleljob-operator"
CRD = "paralleljobs.paralleljob.dev"
# The operator deployed by these tests watches only this namespace, so that it
# never acts on another test's ParallelJobs, even if a session dies before its
# teardown. (The default, all namespaces, is what `make demo` runs.)
WATCHED = "pj-deploy-test"


#: The leader-election Lease (docs/operations.md, High availability), and the Fence of the
#: same name beside it.
LEASE = "paralleljob-operator"


def parallel_job(name: str) -> dict[str, Any]:
    """A small ParallelJob of real busybox pods."""
    return {
        "apiVersion": "paralleljob.dev/v1alpha1",
        "kind": "ParallelJob",
        "metadata": {"name": name},
        "spec": {
            "completions": 3,
            "parallelism": 2,
            "backoffLimit": 1,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "worker",
                            "image": "busybox:1.35.0",
                            "imagePullPolicy": "IfNotPresent",
                            "command": ["sh", "-c", "sleep 1"],
                        }
                    ],
                }
            },
        },
    }


def _versions() -> dict[str, str]:
    out = {}
    for line in (REPO / "hack" / "versions.env").read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
    return out


def kubectl_binary() -> str:
    """The pinned kubectl (make build), else whatever is on PATH."""
    cache = Path(os.environ.get("PJ_CACHE_DIR", Path.home() / ".cache" / "paralleljob-operator"))
    pinned = cache / f"kubernetes-{_versions()['KUBERNETES_VERSION']}" / "bin" / "kubectl"
    if pinned.exists():
        return str(pinned)
    found = shutil.which("kubectl")
    assert found, "no kubectl: run make build"
    return found


@dataclass
class Kubectl:
    kubeconfig: str
    binary: str

    @property
    def env(self) -> dict[str, str]:
        env = dict(os.environ, KUBECONFIG=self.kubeconfig)
        env["PATH"] = f"{Path(self.binary).parent}:{env.get('PATH', '')}"
        return env

    def run(
        self, *args: str, check: bool = True, input: str | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [self.binary, *args],
            env=self.env,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            command = " ".join(args)
            raise AssertionError(
                f"kubectl {command} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
            )
        return proc

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "-o", "json").stdout)

    def make(
        self, target: str, timeout: float = 900, **env: str
    ) -> subprocess.CompletedProcess[str]:
        """Runs a make target the way a user does, against this cluster."""
        proc = subprocess.run(
            ["make", "-C", str(REPO), "--no-print-directory", target],
            env=dict(self.env, **env),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert proc.returncode == 0, f"make {target} failed:\n{proc.stdout}\n{proc.stderr}"
        return proc


@pytest.fixture(scope="session")
def kubectl(kubeconfig: Any) -> Kubectl:
    return Kubectl(kubeconfig=str(kubeconfig), binary=kubectl_binary())


def deploy_local(kubectl: Kubectl) -> None:
    """`make deploy-local PJ_MANAGE_JOBS=all`, the operator watching WATCHED only: there it
    is also the Job controller of the Jobs that name none (docs/jobs.md), which only
    test_in_cluster's plain-Job test creates, with the built-in Job controller off."""
    kubectl.make("deploy-local", PJ_WATCH_NAMESPACES=WATCHED, PJ_MANAGE_JOBS="all")


def _fresh_watched_namespace(kubectl: Kubectl) -> None:
    """WATCHED exists and is not on its way out (an earlier session deletes it)."""

    def phase() -> str:
        got = kubectl.run(
            "get", "namespace", WATCHED, "-o", "jsonpath={.status.phase}", check=False
        )
        return got.stdout.strip() if got.returncode == 0 else "Absent"

    wait_until(lambda: phase() != "Terminating", timeout=120, what=f"namespace {WATCHED} to go")
    if phase() == "Absent":
        kubectl.run("create", "namespace", WATCHED)


def _kind_cluster_name(kubectl: Kubectl) -> str | None:
    context = kubectl.run("config", "current-context", check=False).stdout.strip()
    return context.removeprefix("kind-") if context.startswith("kind-") else None


# Package scope: torn down as soon as the last test of tests/deploy is done,
# before any other directory's tests (which run operators of their own).
@pytest.fixture(scope="package")
def deployed(kubectl: Kubectl, is_local_cluster: bool) -> Iterator[Kubectl]:
    """The operator running in-cluster from its image: `make deploy-local` on the local
    cluster, `hack/deploy.sh kind` (what `make deploy` runs) on a kind cluster."""
    kind = None if is_local_cluster else _kind_cluster_name(kubectl)
    if not is_local_cluster and kind is None:
        pytest.skip("in-cluster deploy tests need the local cluster or a kind cluster")
    crd_preinstalled = kubectl.run("get", "crd", CRD, check=False).returncode == 0
    dockerd = str(REPO / "hack" / "dockerd.sh")
    engine_was_running = subprocess.run([dockerd, "status"], capture_output=True).returncode == 0
    _fresh_watched_namespace(kubectl)
    _deploy(kubectl, kind)
    yield kubectl
    # Its ParallelJobs go while the operator still runs (it holds their finalizers).
    kubectl.run(
        "-n",
        WATCHED,
        "delete",
        "paralleljobs.paralleljob.dev",
        "--all",
        "--wait",
        "--timeout=60s",
        check=False,
    )
    env = dict(kubectl.env, PJ_USER_KUBECONFIG=kubectl.kubeconfig)
    if crd_preinstalled:
        env["PJ_UNDEPLOY_KEEP_CRD"] = "1"
    subprocess.run(
        [str(REPO / "hack" / "undeploy.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    kubectl.run("delete", "namespace", WATCHED, "--wait=false", "--ignore-not-found", check=False)
    if not engine_was_running:
        # The engine this session started goes too; its data root (the layer
        # cache) stays for the next build.
        subprocess.run([dockerd, "stop"], capture_output=True, timeout=120, check=False)


@pytest.fixture
def watched(deployed: Kubectl) -> str:
    """The namespace the deployed operator watches."""
    return WATCHED


def _deploy(kubectl: Kubectl, kind: str | None) -> None:
    """`make deploy-local` on the local cluster, `hack/deploy.sh kind` on kind."""
    if kind is None:
        deploy_local(kubectl)
        return
    proc = subprocess.run(
        [str(REPO / "hack" / "deploy.sh"), "kind"],
        env=dict(
            kubectl.env,
            PJ_USER_KUBECONFIG=kubectl.kubeconfig,
            KIND_CLUSTER_NAME=kind,
            PJ_WATCH_NAMESPACES=WATCHED,
        ),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, f"hack/deploy.sh kind failed:\n{proc.stderr}"


def ready_operator_pods(kubectl: Kubectl) -> dict[str, dict[str, Any]]:
    """The operator's pods that run, ready and not on their way out, by name."""
    pods = kubectl.json(
        "-n", SYSTEM_NAMESPACE, "get", "pods", "-l", "app.kubernetes.io/component=operator"
    )["items"]
    return {
        p["metadata"]["name"]: p
        for p in pods
        if p["status"].get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
        and all(s.get("ready") for s in p["status"].get("containerStatuses") or [{}])
    }


def fenced_holder(kubectl: Kubectl) -> str | None:
    """The Lease's holder, once the Fence names it for the same leadership (the Lease's
    leaseTransitions)."""
    lease = kubectl.json("-n", SYSTEM_NAMESPACE, "get", "lease", LEASE)["spec"]
    fence = kubectl.run(
        "-n", SYSTEM_NAMESPACE, "get", "fences.paralleljob.dev", LEASE, "-o", "json", check=False
    )
    if fence.returncode != 0:
        return None
    holder = lease.get("holderIdentity")
    named = {"holderIdentity": holder, "leaseTransitions": lease.get("leaseTransitions", 0)}
    return str(holder) if json.loads(fence.stdout)["spec"] == named else None


def fenced_leader(kubectl: Kubectl) -> tuple[dict[str, Any], str] | None:
    """The leader's pod and the standby's name, once both replicas are ready and the
    Fence names the Lease's holder (a deploy's rollout hands the Lease on)."""
    holder = fenced_holder(kubectl)
    pods = ready_operator_pods(kubectl)
    if holder is None or len(pods) != 2 or holder not in pods:
        return None
    [standby] = set(pods) - {holder}
    return pods[holder], standby
