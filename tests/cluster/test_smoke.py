"""Smoke tests of the test cluster: what issue 2 says the cluster must do.

They run on the local cluster and, with PJ_TEST_KUBECONFIG, on kind (where
the local-only ones skip). Every wait has a deadline (tests.support.wait).
"""

from __future__ import annotations

import os
import re
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import ApiException

from tests.conftest import KWOK_TOLERATION, REPO_ROOT, Cluster, kubectl, start_local_cluster
from tests.support.wait import wait_until

BUSYBOX = "busybox:1.35.0"
REDIS = "redis:7.0.15"
POD_TIMEOUT = 120


def pod_manifest(
    name: str,
    image: str,
    command: list[str] | None = None,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    kwok: bool = False,
    restart_policy: str = "Never",
    extra_container: dict[str, Any] | None = None,
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": image, "imagePullPolicy": "IfNotPresent"}
    if command:
        container["command"] = command
    container.update(extra_container or {})
    spec: dict[str, Any] = {
        "restartPolicy": restart_policy,
        "terminationGracePeriodSeconds": 1,
        "containers": [container],
    }
    if kwok:
        spec["nodeSelector"] = {"type": "kwok"}
        spec["tolerations"] = [KWOK_TOLERATION]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
        "spec": spec,
    }


def wait_for_phase(core_v1: Any, namespace: str, name: str, phases: set[str]) -> Any:
    def probe() -> Any:
        pod = core_v1.read_namespaced_pod(name, namespace)
        return pod if pod.status.phase in phases else None

    return wait_until(probe, timeout=POD_TIMEOUT, what=f"pod {namespace}/{name} in {phases}")


def terminated(pod: Any) -> Any:
    state = pod.status.container_statuses[0].state
    assert state.terminated is not None, f"container not terminated: {state}"
    return state.terminated


def ready_condition(node: Any) -> str | None:
    for condition in node.status.conditions or []:
        if condition.type == "Ready":
            return str(condition.status)
    return None


# ---------------------------------------------------------------- nodes


@pytest.mark.cluster
def test_every_node_is_ready(core_v1: Any) -> None:
    nodes = core_v1.list_node().items
    assert nodes, "the cluster has no node"
    not_ready = {n.metadata.name: ready_condition(n) for n in nodes if ready_condition(n) != "True"}
    assert not not_ready, f"nodes not Ready: {not_ready}"


@pytest.mark.localcluster
def test_local_cluster_has_a_real_and_a_kwok_node(core_v1: Any) -> None:
    nodes = {n.metadata.name: n for n in core_v1.list_node().items}
    real = [
        n for n in nodes.values() if n.metadata.labels.get("paralleljob.dev/node-type") == "real"
    ]
    assert len(real) == 1, f"expected one real node, got {sorted(nodes)}"
    kwok = nodes["kwok-node-0"]
    assert kwok.metadata.labels["type"] == "kwok"
    assert kwok.metadata.labels["paralleljob.dev/node-type"] == "kwok"
    taints = [(t.key, t.value, t.effect) for t in kwok.spec.taints]
    assert ("kwok.x-k8s.io/node", "fake", "NoSchedule") in taints


# ---------------------------------------------------------------- real node


@pytest.mark.realnode
def test_busybox_pod_fails_with_its_exit_code_and_logs(core_v1: Any, namespace: str) -> None:
    core_v1.create_namespaced_pod(
        namespace, pod_manifest("exit3", BUSYBOX, ["sh", "-c", "echo hi; exit 3"])
    )
    pod = wait_for_phase(core_v1, namespace, "exit3", {"Failed", "Succeeded"})
    assert pod.status.phase == "Failed"
    assert terminated(pod).exit_code == 3
    assert core_v1.read_namespaced_pod_log("exit3", namespace) == "hi\n"


@pytest.mark.realnode
def test_pod_resolves_the_kubernetes_service(core_v1: Any, namespace: str) -> None:
    service_ip = core_v1.read_namespaced_service("kubernetes", "default").spec.cluster_ip
    core_v1.create_namespaced_pod(
        namespace,
        pod_manifest("dns", BUSYBOX, ["nslookup", "kubernetes.default.svc.cluster.local"]),
    )
    pod = wait_for_phase(core_v1, namespace, "dns", {"Failed", "Succeeded"})
    log = core_v1.read_namespaced_pod_log("dns", namespace)
    assert pod.status.phase == "Succeeded", log
    assert re.search(rf"Address:\s+{re.escape(service_ip)}\b", log), log


@pytest.mark.realnode
def test_pod_reaches_redis_through_a_service_by_name(core_v1: Any, namespace: str) -> None:
    probe = {"tcpSocket": {"port": 6379}, "periodSeconds": 1}
    core_v1.create_namespaced_pod(
        namespace,
        pod_manifest(
            "redis",
            REDIS,
            labels={"app": "redis"},
            restart_policy="Always",
            extra_container={"ports": [{"containerPort": 6379}], "readinessProbe": probe},
        ),
    )
    core_v1.create_namespaced_service(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "redis"},
            "spec": {"selector": {"app": "redis"}, "ports": [{"port": 6379}]},
        },
    )

    def redis_ready() -> bool:
        status = core_v1.read_namespaced_pod("redis", namespace).status
        return any(c.type == "Ready" and c.status == "True" for c in status.conditions or [])

    wait_until(redis_ready, timeout=POD_TIMEOUT, what="redis pod Ready")
    # kube-proxy programs the Service a moment after the endpoint is ready,
    # so the client retries within its own deadline.
    script = (
        "i=0; while [ $i -lt 30 ]; do "
        'out=$(redis-cli -h redis -p 6379 ping 2>&1); [ "$out" = PONG ] && echo "$out" && exit 0; '
        'i=$((i+1)); sleep 1; done; echo "last: $out"; exit 1'
    )
    core_v1.create_namespaced_pod(namespace, pod_manifest("client", REDIS, ["sh", "-c", script]))
    pod = wait_for_phase(core_v1, namespace, "client", {"Failed", "Succeeded"})
    log = core_v1.read_namespaced_pod_log("client", namespace)
    assert pod.status.phase == "Succeeded", log
    assert log.strip() == "PONG"


# ---------------------------------------------------------------- kwok node


@pytest.mark.kwok
def test_kwok_pod_succeeds_after_the_annotated_duration(core_v1: Any, namespace: str) -> None:
    core_v1.create_namespaced_pod(
        namespace,
        pod_manifest("ok", BUSYBOX, annotations={"kwok.paralleljob.dev/duration": "2s"}, kwok=True),
    )
    pod = wait_for_phase(core_v1, namespace, "ok", {"Failed", "Succeeded"})
    assert pod.status.phase == "Succeeded"
    assert core_v1.read_node(pod.spec.node_name).metadata.labels.get("type") == "kwok"
    state = terminated(pod)
    assert state.exit_code == 0
    started: datetime = state.started_at
    finished: datetime = state.finished_at
    # Timestamps have one-second resolution.
    assert (finished - started).total_seconds() >= 1, (started, finished)


@pytest.mark.kwok
def test_kwok_pod_fails_with_the_annotated_exit_code(core_v1: Any, namespace: str) -> None:
    core_v1.create_namespaced_pod(
        namespace,
        pod_manifest(
            "fail", BUSYBOX, annotations={"kwok.paralleljob.dev/exit-code": "7"}, kwok=True
        ),
    )
    pod = wait_for_phase(core_v1, namespace, "fail", {"Failed", "Succeeded"})
    assert pod.status.phase == "Failed"
    assert terminated(pod).exit_code == 7


# ---------------------------------------------------------------- admission


@pytest.mark.cluster
def test_privileged_pod_is_rejected_in_a_restricted_namespace(core_v1: Any, namespace: str) -> None:
    kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")
    manifest = pod_manifest(
        "privileged",
        BUSYBOX,
        ["sleep", "1"],
        extra_container={"securityContext": {"privileged": True}},
    )
    with pytest.raises(ApiException) as raised:
        core_v1.create_namespaced_pod(namespace, manifest)
    assert raised.value.status == 403
    assert "violates PodSecurity" in str(raised.value.body)


# ---------------------------------------------------------------- teardown


def _cluster_pids() -> dict[str, int]:
    pids: dict[str, int] = {}
    for pid_file in (REPO_ROOT / ".cluster" / "pids").glob("*.pid"):
        pids[pid_file.stem] = int(pid_file.read_text().split()[0])
    return pids


def _running(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return not re.search(r"^State:\s+Z", status, re.M)


def _output(*cmd: str) -> str:
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


@pytest.mark.localcluster
@pytest.mark.destructive
def test_cluster_down_leaves_nothing_behind(cluster: Cluster) -> None:
    env = dict(os.environ)
    cluster_dir = str(REPO_ROOT / ".cluster")
    pids = _cluster_pids()
    assert len(pids) == 9, f"expected 9 running components, pid files: {sorted(pids)}"
    try:
        down = subprocess.run(
            [str(REPO_ROOT / "hack" / "cluster-down.sh")],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
        assert down.returncode == 0, down.stdout + down.stderr

        alive = {name: pid for name, pid in pids.items() if _running(pid)}
        assert not alive, f"processes still running: {alive}"
        shims = [
            p.parent.name
            for p in Path("/proc").glob("[0-9]*/cmdline")
            if _shim_of_cluster(p, cluster_dir)
        ]
        assert not shims, f"containerd shims of the cluster still running: {shims}"
        mounts = [
            line.split()[4]
            for line in Path("/proc/self/mountinfo").read_text().splitlines()
            if line.split()[4].startswith(cluster_dir)
        ]
        assert not mounts, f"mounts left: {mounts}"
        links = _output("ip", "-o", "link", "show")
        assert "pjbr0" not in links, links
        assert "unreachable 10.245.0.0/16" not in _output("ip", "route", "show")
        for save in ("iptables-save", "ip6tables-save"):
            chains = re.findall(r"^:((?:KUBE|PJ|CNI)-\S+)", _output(save), re.M)
            assert not chains, f"{save}: chains left: {chains}"
        cgroups = list(Path("/sys/fs/cgroup").glob("*/paralleljob-local-cluster"))
        assert not cgroups, f"cgroups left: {cgroups}"
        leftovers = sorted(p.name for p in Path(cluster_dir).iterdir() if p.name != "logs")
        assert not leftovers, f"state left in .cluster: {leftovers}"
    finally:
        # Someone may have been using the cluster this session found running.
        if cluster.was_running:
            start_local_cluster()


def _shim_of_cluster(cmdline: Path, cluster_dir: str) -> bool:
    try:
        args = cmdline.read_bytes().split(b"\0")
    except OSError:
        return False
    return any(a.decode(errors="replace").startswith(cluster_dir) for a in args) and any(
        b"containerd-shim" in a for a in args[:1]
    )
