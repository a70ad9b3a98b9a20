"""Cluster fixtures shared by every test directory.

Which cluster the tests use:

* ``PJ_TEST_KUBECONFIG`` set: that existing cluster (e.g. kind). Nothing is
  started or stopped; tests marked ``localcluster`` are skipped, and tests
  marked ``kwok`` are skipped when it has no node labelled ``type=kwok``.
* otherwise: the project's local cluster (``.cluster/kubeconfig``), started
  once with ``hack/cluster-up.sh`` if it does not answer. There nothing may
  skip: a missing kwok node is a failure.

Tests marked ``cluster``, ``realnode``, ``kwok`` or ``localcluster`` get the
cluster (and ``KUBECONFIG``) without asking for a fixture; tests without
those markers never start a cluster. A test marked ``destructive`` (it stops
the local cluster) runs after every other test of the session.

``make test`` runs the tests that keep to their own namespace and operator a few
at a time (pytest-xdist); those marked ``exclusive`` (every test in EXCLUSIVE_DIRS,
and destructive ones) change what the others see, so a run with ``-n`` deselects
them and ``make test`` runs them afterwards, one at a time. Set-up that changes
the machine (starting the cluster, building an image) holds a ``machine_lock``.
"""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support import long_first
from tests.support.locks import machine_lock
from tests.support.wait import wait_until

REPO_ROOT = Path(__file__).resolve().parent.parent
LOCAL_KUBECONFIG = REPO_ROOT / ".cluster" / "kubeconfig"
CLUSTER_MARKERS = ("cluster", "realnode", "kwok", "localcluster", "destructive")

# Contract with the local cluster (hack/cluster-up.sh) and other engineers.
KWOK_NODE_SELECTOR = "type=kwok"
KWOK_TOLERATION: dict[str, str] = {
    "key": "kwok.x-k8s.io/node",
    "operator": "Exists",
    "effect": "NoSchedule",
}


def _pinned_versions() -> dict[str, str]:
    text = (REPO_ROOT / "hack" / "versions.env").read_text()
    return dict(re.findall(r"^([A-Z_]+)=(\S+)", text, re.M))


CACHE_DIR = Path(os.environ.get("PJ_CACHE_DIR", Path.home() / ".cache" / "paralleljob-operator"))
KUBE_BIN = CACHE_DIR / f"kubernetes-{_pinned_versions()['KUBERNETES_VERSION']}" / "bin"
# The pinned kubectl first, whatever else (an unrelated old one) is on PATH.
os.environ["PATH"] = f"{KUBE_BIN}{os.pathsep}{os.environ.get('PATH', '')}"


@dataclass(frozen=True)
class Cluster:
    kubeconfig: str
    local: bool
    # Whether this session found the local cluster already running (then
    # someone may be using it, and a test that stops it must restart it).
    was_running: bool


def kubectl(
    *args: str, check: bool = True, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Runs the pinned kubectl against $KUBECONFIG."""
    return subprocess.run(
        ["kubectl", *args], capture_output=True, text=True, check=check, timeout=timeout
    )


def _answers(kubeconfig: Path) -> bool:
    if not kubeconfig.exists():
        return False
    result = subprocess.run(
        [
            "kubectl",
            "--kubeconfig",
            str(kubeconfig),
            "--request-timeout=5s",
            "get",
            "--raw",
            "/readyz",
        ],
        capture_output=True,
        text=True,
    )
    return result.returncode == 0


def start_local_cluster() -> None:
    """Runs hack/cluster-up.sh (a no-op when the cluster is already running)."""
    result = subprocess.run(
        [str(REPO_ROOT / "hack" / "cluster-up.sh")], capture_output=True, text=True, timeout=600
    )
    if result.returncode != 0:
        pytest.fail(
            f"hack/cluster-up.sh failed ({result.returncode}):\n{result.stdout}{result.stderr}",
            pytrace=False,
        )


# ---------------------------------------------------------------- pytest hooks


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(long_first, "long-first")
    config.addinivalue_line(
        "markers",
        "destructive: stops the local cluster; runs after every other test of the session",
    )
    config.addinivalue_line(
        "markers",
        "exclusive: changes what every other test on the cluster sees; never runs beside "
        "another test (with pytest-xdist, -n: deselected; make test runs these afterwards)",
    )
    config.addinivalue_line(
        "markers",
        "warnings(*reasons): the Warning Events a test causes on purpose; tests/e2e fails a "
        "test whose namespace holds a Warning of another reason (a happy path is quiet)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _is_exclusive(item):
            item.add_marker(pytest.mark.exclusive)
        if any(Path(item.path).is_relative_to(path) for path in KIND_PASS):
            item.add_marker(pytest.mark.kind)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        alone = [item for item in items if item.get_closest_marker("exclusive")]
        config.hook.pytest_deselected(items=alone)
        items[:] = [item for item in items if not item.get_closest_marker("exclusive")]
    # Stable sort: destructive tests go last, just before them the chaos tests that
    # restart the control plane (a restart on a busy machine takes minutes, and make
    # test's kind pass, hack/test-last.sh, starts its cluster beside the exclusive tests);
    # everything else keeps its order.
    items.sort(
        key=lambda item: (
            item.get_closest_marker("destructive") is not None,
            _restarts_a_component(item),
        )
    )


def _restarts_a_component(item: pytest.Item) -> bool:
    """A chaos test exclusive for itself, not for its directory's sake: it restarts a
    component every test shares (tests/deploy's slow link keeps with the deploy)."""
    path = Path(item.path)
    return (
        item.get_closest_marker("chaos") is not None
        and _is_exclusive(item)
        and not any(path.is_relative_to(directory) for directory in EXCLUSIVE_DIRS)
    )


# The directories whose every test is exclusive: tests/bench and tests/deploy run the
# operator in-cluster watching every namespace (a second operator for everyone else's
# jobs), remove the CRD and turn the built-in Job controller off; tests/release installs
# releases in-cluster, an older one's CRDs over this tree's; tests/upstream turns
# the built-in Job controller off. Elsewhere a test is exclusive when it is marked so, or
# destructive: the chaos tests that restart or break the cluster's components
# (tests/chaos; those that kill, freeze or starve only their own operators, or delete
# only nodes of their own, run beside the others), the smoke test that stops the whole
# cluster, the aggregated API registered for every client's discovery (tests/cluster).
EXCLUSIVE_DIRS = tuple(
    REPO_ROOT / "tests" / name for name in ("bench", "deploy", "release", "upstream")
)
#: What make test runs on kind (the kind pass, hack/test-last.sh and kind-test.sh), beside
#: the exclusive tests, rather than on the local cluster: marked ``kind``. The in-cluster
#: deploy (but its tests of make deploy-local, marked ``localcluster``), the upgrade from
#: the previous release (its archives kind-loaded, as a user without a registry does),
#: the seed's workloads and the work-queue tests on real pods: nothing there is the local
#: cluster's own, and the local cluster's first pass is the CPU-bound part of make test.
KIND_PASS = tuple(
    REPO_ROOT / "tests" / path
    for path in (
        "deploy",
        "release",
        "e2e/test_workloads.py",
        "e2e/test_workqueue.py",
        "e2e/test_workqueue_scale_down.py",
    )
)


def _is_exclusive(item: pytest.Item) -> bool:
    path = Path(item.path)
    return (
        item.get_closest_marker("destructive") is not None
        or item.get_closest_marker("exclusive") is not None
        or any(path.is_relative_to(directory) for directory in EXCLUSIVE_DIRS)
    )


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def cluster() -> Cluster:
    """The cluster of this session, started once if it is the local one."""
    external = os.environ.get("PJ_TEST_KUBECONFIG")
    if external:
        path = Path(external).expanduser().resolve()
        if not path.is_file():
            pytest.fail(f"PJ_TEST_KUBECONFIG={external}: no such file", pytrace=False)
        os.environ["KUBECONFIG"] = str(path)
        return Cluster(kubeconfig=str(path), local=False, was_running=True)
    with machine_lock("cluster"):
        was_running = _answers(LOCAL_KUBECONFIG)
        if not was_running:
            start_local_cluster()
    os.environ["KUBECONFIG"] = str(LOCAL_KUBECONFIG)
    return Cluster(kubeconfig=str(LOCAL_KUBECONFIG), local=True, was_running=was_running)


@pytest.fixture(scope="session")
def kubeconfig(cluster: Cluster) -> str:
    """Path of the kubeconfig of the test cluster; also exported as KUBECONFIG."""
    os.environ["KUBECONFIG"] = cluster.kubeconfig
    return cluster.kubeconfig


@pytest.fixture(scope="session")
def is_local_cluster(cluster: Cluster) -> bool:
    """True on the project's local cluster, False on an external one (kind...)."""
    return cluster.local


@pytest.fixture(scope="session")
def api_client(kubeconfig: str) -> Any:
    """A `kubernetes.client.ApiClient` for the test cluster."""
    from kubernetes import config

    return config.new_client_from_config(config_file=kubeconfig)


@pytest.fixture(scope="session")
def core_v1(api_client: Any) -> Any:
    from kubernetes import client

    return client.CoreV1Api(api_client)


@pytest.fixture(scope="session")
def kwok_nodes(kubeconfig: str) -> list[str]:
    """Names of the simulated (kwok) nodes, by the contract label type=kwok."""
    out = kubectl("get", "nodes", "-l", KWOK_NODE_SELECTOR, "-o", "name").stdout
    return [line.removeprefix("node/") for line in out.split()]


@pytest.fixture(autouse=True)
def _cluster_markers(request: pytest.FixtureRequest) -> None:
    """Gives marked tests the cluster; skips what cannot run on it."""
    marked = {m for m in CLUSTER_MARKERS if request.node.get_closest_marker(m)}
    if not marked:
        return
    cluster: Cluster = request.getfixturevalue("cluster")
    if marked & {"localcluster", "destructive"} and not cluster.local:
        pytest.skip("only meaningful on the project's local cluster (PJ_TEST_KUBECONFIG is set)")
    if "kwok" in marked and not request.getfixturevalue("kwok_nodes"):
        if cluster.local:
            pytest.fail("the local cluster has no kwok node (label type=kwok)", pytrace=False)
        pytest.skip("no kwok node (label type=kwok) in this cluster")


@pytest.fixture
def namespace(kubeconfig: str, api_client: Any) -> Iterator[str]:
    """A fresh namespace for one test, deleted (without waiting) afterwards.

    Returned once its default ServiceAccount exists, since pods cannot be
    created before that.
    """
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    # Through the API client, not kubectl: four kubectl processes per test were a fifth
    # of all the kubectl CPU of make test's first pass.
    core = client.CoreV1Api(api_client)
    name = f"pj-test-{uuid.uuid4().hex[:8]}"
    labels = {"paralleljob.dev/test": "true"}
    core.create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=labels))
    )

    def has_default_sa() -> bool:
        try:
            core.read_namespaced_service_account("default", name, _preload_content=False)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    wait_until(has_default_sa, timeout=60, what=f"default ServiceAccount in {name}")
    try:
        yield name
    finally:
        try:
            core.delete_namespace(name, _preload_content=False)
        except ApiException as exc:
            if exc.status != 404:
                raise


@pytest.fixture(scope="session")
def kubectl_run() -> Callable[..., subprocess.CompletedProcess[str]]:
    """The pinned kubectl as a function: kubectl_run("get", "pods", check=True)."""
    return kubectl
