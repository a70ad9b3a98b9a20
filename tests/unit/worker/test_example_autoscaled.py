"""manifests/examples/workqueue-autoscaled as ``kubectl apply -k`` applies it (rendered with
``kubectl kustomize``): self-contained, namespace-independent, and safe to apply in one go.
The address KEDA dials is resolved here as KEDA resolves it, and the workers' init container
runs against a real redis-server. On the cluster, tests/e2e/test_keda.py applies it for real.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from paralleljob.worker.cli import parse_work_args
from tests.support.wait import wait_until

from .examples import one, render

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "manifests" / "examples" / "workqueue-autoscaled"
BASE = REPO / "manifests" / "examples" / "workqueue"
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def rendered() -> list[dict[str, Any]]:
    return render(EXAMPLE)


def base(name: str, kind: str) -> dict[str, Any]:
    return one([d for d in yaml.safe_load_all((BASE / name).read_text()) if d], kind)


def pod_spec(doc: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = doc["spec"]["template"]["spec"]
    return spec


def env_values(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}


def expand(value: str, env: dict[str, str]) -> str:
    """$(VAR) as the kubelet and KEDA expand it: a reference to an unknown VAR stays."""
    return re.sub(r"\$\((\w+)\)", lambda m: env.get(m[1], m[0]), value)


def keda_env(container: dict[str, Any], secrets: dict[str, dict[str, str]]) -> dict[str, str]:
    """The container's env as KEDA resolves it for a trigger's *FromEnv (its resolver's
    resolveEnv): plain values with $(VAR) expanded from the variables before them, Secret
    and ConfigMap keys; the downward API (fieldRef) skipped, as there is no pod."""
    resolved: dict[str, str] = {}
    for var in container.get("env", []):
        if "value" in var:
            resolved[var["name"]] = expand(var["value"], resolved)
        elif "secretKeyRef" in var.get("valueFrom", {}):
            ref = var["valueFrom"]["secretKeyRef"]
            resolved[var["name"]] = secrets[ref["name"]][ref["key"]]
        else:
            assert "fieldRef" in var["valueFrom"], var
    return resolved


def test_it_is_the_base_s_redis_and_producer_plus_the_autoscaled_job(
    rendered: list[dict[str, Any]],
) -> None:
    kustomization = yaml.safe_load((EXAMPLE / "kustomization.yaml").read_text())
    assert kustomization["resources"][0] == "../workqueue"
    assert "namespace" not in kustomization, "the namespace is the user's: kubectl -n"
    kinds = sorted(d["kind"] for d in rendered)
    assert kinds == [
        "Deployment",
        "Job",
        "ParallelJob",
        "ScaledObject",
        "Secret",
        "Service",
        "ServiceAccount",
    ]
    assert all("namespace" not in d["metadata"] for d in rendered)
    # The ServiceAccount comes before its token Secret (a token Secret whose ServiceAccount
    # does not exist is deleted by the control plane).
    order = [d["kind"] for d in rendered]
    assert order.index("ServiceAccount") < order.index("Secret")
    # Redis as in the base; the producer too, with more items.
    for kind in ("Deployment", "Service"):
        assert one(rendered, kind) == base("redis.yaml", kind)
    producer, base_producer = one(rendered, "Job"), base("enqueue-job.yaml", "Job")
    [enqueue] = pod_spec(producer)["containers"]
    [base_enqueue] = pod_spec(base_producer)["containers"]
    assert [e["name"] for e in enqueue["env"]] == [e["name"] for e in base_enqueue["env"]]
    assert env_values(enqueue) == {**env_values(base_enqueue), "LAST": "300"}
    enqueue["env"] = base_enqueue["env"]
    assert producer == base_producer


def test_keda_dials_redis_in_whichever_namespace_it_is_applied_to(
    rendered: list[dict[str, Any]],
) -> None:
    secret, account = one(rendered, "Secret"), one(rendered, "ServiceAccount")
    assert secret["type"] == "kubernetes.io/service-account-token"
    assert "data" not in secret, "the control plane fills it in"
    assert secret["metadata"]["annotations"] == {
        "kubernetes.io/service-account.name": account["metadata"]["name"]
    }
    assert account["automountServiceAccountToken"] is False
    so, pj = one(rendered, "ScaledObject"), one(rendered, "ParallelJob")
    target = so["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("ParallelJob", pj["metadata"]["name"])
    [trigger] = so["spec"]["triggers"]
    assert trigger["type"] == "redis-streams"
    assert "address" not in trigger["metadata"] and "host" not in trigger["metadata"]
    [worker] = [
        c for c in pod_spec(pj)["containers"] if c["name"] == target["envSourceContainerName"]
    ]
    service = one(rendered, "Service")
    port = service["spec"]["ports"][0]["port"]
    for namespace in ("wq", "any-namespace"):
        # What the token controller writes into the Secret created in that namespace.
        secrets = {secret["metadata"]["name"]: {"namespace": namespace}}
        env = keda_env(worker, secrets)
        address = env[trigger["metadata"]["addressFromEnv"]]
        assert address == f"{service['metadata']['name']}.{namespace}.svc.cluster.local:{port}"
        # The workers dial the same Redis (the kubelet expands $(VAR) the same way).
        command = [expand(a, env) for a in worker["command"]]
        args = parse_work_args(command[1:])
        assert args.redis == f"redis://{address}/0"
        assert (args.stream, args.group) == ("items", trigger["metadata"]["consumerGroup"])


def test_the_worker_is_the_base_s_but_for_the_address_and_waits_for_the_items(
    rendered: list[dict[str, Any]],
) -> None:
    pj, multi = one(rendered, "ParallelJob"), base("multi-workqueue-job.yaml", "ParallelJob")
    [worker], [base_worker] = pod_spec(pj)["containers"], pod_spec(multi)["containers"]
    assert worker["command"] == base_worker["command"]
    assert [e["name"] for e in worker["env"]] == [
        "POD_NAME",
        "NAMESPACE",
        "REDIS_ADDRESS",
        "REDIS_URL",
    ]
    [wait] = pod_spec(pj)["initContainers"]
    assert wait["name"] == "wait-for-items"
    assert (wait["image"], wait["imagePullPolicy"]) == (worker["image"], "IfNotPresent")
    assert wait["securityContext"] == worker["securityContext"]
    # The kustomization's replacements: the workers wait for what the producer enqueues.
    [enqueue] = pod_spec(one(rendered, "Job"))["containers"]
    produced = {k: v for k, v in env_values(enqueue).items() if k in ("FIRST", "LAST")}
    assert {k: env_values(wait)[k] for k in ("FIRST", "LAST")} == produced
    # Enough items for KEDA to ask for every worker it may start.
    so = one(rendered, "ScaledObject")
    [trigger] = so["spec"]["triggers"]
    items = int(produced["LAST"]) - int(produced["FIRST"]) + 1
    assert items / int(trigger["metadata"]["lagCount"]) >= so["spec"]["maxReplicaCount"]


def _xlen_calls(client: redis.Redis) -> int:
    stats: dict[str, Any] = client.info("commandstats")
    return int(stats.get("cmdstat_xlen", {}).get("calls", 0))


def test_the_init_container_waits_until_the_producer_is_done(
    rendered: list[dict[str, Any]], redis_url: str, client: redis.Redis
) -> None:
    [wait] = pod_spec(one(rendered, "ParallelJob"))["initContainers"]
    [enqueue] = pod_spec(one(rendered, "Job"))["containers"]
    path = f"{BIN}{os.pathsep}{os.environ['PATH']}"
    last = int(env_values(enqueue)["LAST"])

    def produce(first: int, last: int) -> None:
        env = {**env_values(enqueue), "REDIS_URL": redis_url}
        env.update(FIRST=str(first), LAST=str(last))
        done = subprocess.run(
            [expand(a, env) for a in enqueue["command"]],
            env={**os.environ, **env, "PATH": path},
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode == 0, done.stderr

    client.config_resetstat()
    waiting = subprocess.Popen(
        wait["command"],
        env={**os.environ, **env_values(wait), "REDIS_URL": redis_url, "PATH": path},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # All but the last item: it keeps waiting (it asked again after they were there).
        produce(1, last - 1)
        asked = _xlen_calls(client)
        wait_until(lambda: _xlen_calls(client) > asked, timeout=10, what="another XLEN")
        assert waiting.poll() is None, waiting.communicate()
        produce(last, last)
        out, err = waiting.communicate(timeout=10)
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.wait()
    assert waiting.returncode == 0, err
    assert out == f"{last} items in the stream items ({last} wanted)\n"


def test_the_init_container_gives_up_with_its_reason(
    rendered: list[dict[str, Any]], redis_url: str, client: redis.Redis
) -> None:
    [wait] = pod_spec(one(rendered, "ParallelJob"))["initContainers"]
    client.xadd("items", {"item": "item-001"})
    env = {**env_values(wait), "REDIS_URL": redis_url, "WAIT_SECONDS": "1"}
    path = f"{BIN}{os.pathsep}{os.environ['PATH']}"
    done = subprocess.run(
        wait["command"],
        env={**os.environ, **env, "PATH": path},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 1
    want = int(env["LAST"]) - int(env["FIRST"]) + 1
    assert done.stderr == f"waited 1s for {want} items in the stream items: 1\n"
