"""What the work-queue tests share (tests/e2e/test_workqueue.py, test_keda.py): the worker
image on the node, the example's Redis as a ``Queue`` read and written through redis-cli, and
the example's worker pod template running ``TASK``. The fixtures ``worker_image`` and ``queue``
are made available to every e2e test by conftest.py. See test_workqueue.py's docstring for why
each is done this way.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import Cluster
from tests.support.locks import machine_lock
from tests.support.wait import wait_until

from .support import Kubectl, kubectl

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "manifests" / "examples" / "workqueue"
NODE_IMAGE = REPO / "hack" / "node-image.sh"
DOCKERD = REPO / "hack" / "dockerd.sh"
STREAM = "items"
DEAD = f"{STREAM}:dead"
GROUP = "workers"
REDIS_LABEL = "app.kubernetes.io/name=redis"

#: The per-item task of these tests (the example's, plus what the tests observe): the item's
#: sha256 into ``results``, a count of its runs into ``runs`` and the pod that ran it last
#: into ``by``, after ITEM_SECONDS of "work" and once the key ITEM_GATE (if set) exists;
#: exit 3 for the item POISON; hang (mid-item) when the pod is in the set ``hold``.
#: It speaks RESP over a socket rather than import redis-py: a process runs per item, and the
#: import (0.15 s of CPU) made the tests' hundreds of items CPU-bound on a 2-core machine.
TASK = """\
import hashlib, os, socket, sys, time
from urllib.parse import urlsplit
item, pod = os.environ["PJ_ITEM"], os.environ["POD_NAME"]
if item == os.environ.get("POISON"):
    sys.exit(3)
url = urlsplit(os.environ["REDIS_URL"])
conn = socket.create_connection((url.hostname, url.port or 6379), timeout=30)
replies = conn.makefile("rb")
def call(*args):
    out = [b"*%d\\r\\n" % len(args)]
    for arg in args:
        out.append(b"$%d\\r\\n%s\\r\\n" % (len(arg.encode()), arg.encode()))
    conn.sendall(b"".join(out))
    reply = replies.readline()
    if reply.startswith(b"-"):
        sys.exit(f"redis: {reply.decode().strip()}")
    return reply.strip()
call("SELECT", url.path.strip("/") or "0")
if call("SISMEMBER", "hold", pod) == b":1":
    call("HSET", "held", pod, item)
    time.sleep(600)
time.sleep(float(os.environ.get("ITEM_SECONDS", "0")))
while os.environ.get("ITEM_GATE") and call("EXISTS", os.environ["ITEM_GATE"]) != b":1":
    time.sleep(0.2)
call("MULTI")
call("HSET", "results", item, hashlib.sha256(item.encode()).hexdigest())
call("HINCRBY", "runs", item, "1")
call("HSET", "by", item, pod)
call("EXEC")
"""

# ------------------------------------------------------------------ the image on the node


def _kind_cluster_name() -> str | None:
    context = kubectl("config", "current-context", check=False).stdout.strip()
    return context.removeprefix("kind-") if context.startswith("kind-") else None


@pytest.fixture(scope="session")
def worker_image(cluster: Cluster) -> Iterator[str]:
    """The operator's image, which has paralleljob-worker, on the node: its reference."""
    given = os.environ.get("PJ_WORKER_IMAGE")
    if given:
        yield given
        return
    env = dict(os.environ)
    if cluster.local:
        mode = "local"
    else:
        kind = _kind_cluster_name()
        if kind is None:
            pytest.skip(
                "the worker image goes onto the local cluster or kind; else set PJ_WORKER_IMAGE"
            )
        mode = "kind"
        env.update(PJ_USER_KUBECONFIG=cluster.kubeconfig, KIND_CLUSTER_NAME=kind)
    with machine_lock("docker-engine"):  # one build at a time; a second worker finds it done
        engine_was_running = mode == "kind" or _dockerd_running()
        proc = subprocess.run(
            [str(NODE_IMAGE), mode], env=env, capture_output=True, text=True, timeout=1800
        )
    if proc.returncode != 0:
        pytest.fail(f"hack/node-image.sh {mode} failed:\n{proc.stderr[-4000:]}", pytrace=False)
    image = proc.stdout.strip().splitlines()[-1]
    try:
        yield image
    finally:
        with machine_lock("docker-engine"):
            if not engine_was_running and _dockerd_running():
                # The engine this session started goes; its data root (the layer cache) stays.
                subprocess.run(
                    [str(DOCKERD), "stop"], capture_output=True, timeout=120, check=False
                )


def _dockerd_running() -> bool:
    return subprocess.run([str(DOCKERD), "status"], capture_output=True).returncode == 0


# ------------------------------------------------------------------ Redis and the queue


def _example(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((EXAMPLE / name).read_text()) if d]


def sha256(item: str) -> str:
    return hashlib.sha256(item.encode()).hexdigest()


@dataclass
class Queue:
    """The example's Redis in the test's namespace, read and written through redis-cli."""

    k: Kubectl
    pod: str
    image: str

    def cli(self, *args: str) -> Any:
        out = self.k.run("exec", self.pod, "-c", "redis", "--", "redis-cli", "--json", *args)
        text = out.stdout.strip()
        # redis-cli prints an error reply as `error:"..."` and still exits 0.
        assert not text.startswith("error:"), f"redis-cli {' '.join(args)}: {text}"
        return json.loads(text)

    def hash(self, key: str) -> dict[str, str]:
        return dict(self.cli("HGETALL", key))

    def group(self) -> dict[str, Any]:
        [group] = [g for g in self.cli("XINFO", "GROUPS", STREAM) if g["name"] == GROUP]
        return dict(group)

    def pending_of(self, consumer: str) -> list[str]:
        """The entry ids the consumer holds (delivered to it, not acked)."""
        return [e[0] for e in self.cli("XPENDING", STREAM, GROUP, "-", "+", "100", consumer)]

    def dead_letters(self) -> list[dict[str, str]]:
        letters = []
        for _, fields in self.cli("XRANGE", DEAD, "-", "+"):
            letters.append(dict(zip(fields[::2], fields[1::2], strict=True)))
        return letters

    def item_of(self, entry_id: str) -> str:
        [[_, fields]] = self.cli("XRANGE", STREAM, entry_id, entry_id)
        return str(dict(zip(fields[::2], fields[1::2], strict=True))["item"])

    def enqueue(self, first: int, last: int) -> list[str]:
        """Runs the example's producer Job for item-FIRST .. item-LAST; returns the items."""
        [job] = _example("enqueue-job.yaml")
        name = f"enqueue-{first}-{last}"
        job["metadata"]["name"] = name
        [container] = job["spec"]["template"]["spec"]["containers"]
        container["image"] = self.image
        values = {"FIRST": str(first), "LAST": str(last)}
        for var in container["env"]:
            var["value"] = values.get(var["name"], var["value"])
        before = int(self.cli("XLEN", STREAM))
        self.k.run("create", "-f", "-", input=json.dumps(job))
        producer_done(self.k, name)
        items = items_of(first, last)
        assert int(self.cli("XLEN", STREAM)) == before + len(items)
        return items

    def assert_done(self, items: list[str], *, once: bool) -> dict[str, int]:
        """Every item has its correct result, none is dead, nothing is undelivered or
        pending; with ``once``, every item ran exactly once. Returns the runs per item."""
        results = self.hash("results")
        assert sorted(set(items) - set(results)) == [], "items without a result"
        assert sorted(set(results) - set(items)) == [], "results of no item"
        assert [i for i in items if results[i] != sha256(i)] == [], "wrong results"
        assert self.dead_letters() == []
        group = self.group()
        assert (group["lag"], group["pending"]) == (0, 0), group
        runs = {item: int(n) for item, n in self.hash("runs").items()}
        if once:
            assert {i: n for i, n in runs.items() if n != 1} == {}, "items run more than once"
        return runs


def items_of(first: int, last: int) -> list[str]:
    """The items the example's producer enqueues for FIRST and LAST."""
    return [f"item-{i:03d}" for i in range(first, last + 1)]


def producer_done(k: Kubectl, name: str, timeout: float = 180) -> None:
    """Waits for the producer Job ``name`` to finish; fails with its log unless Complete."""

    def finished() -> str | None:
        conditions = k.json("get", "job", name).get("status", {}).get("conditions", [])
        done = [c["type"] for c in conditions if c["status"] == "True"]
        return next((t for t in ("Complete", "Failed") if t in done), None)

    outcome = wait_until(finished, timeout=timeout, interval=1, what=f"producer Job {name}")
    logs = k.run("logs", f"job/{name}", check=False).stdout
    assert outcome == "Complete", f"the producer failed:\n{logs}"


@pytest.fixture
def queue(k: Kubectl, worker_image: str) -> Queue:
    """The example's Redis Deployment and Service in the test's namespace, ready."""
    k.run("apply", "-f", str(EXAMPLE / "redis.yaml"))
    return redis_queue(k, worker_image)


def redis_queue(k: Kubectl, image: str) -> Queue:
    """The Queue of the example's Redis, applied to the test's namespace, once it is Ready."""

    def ready_pod() -> str | None:
        for pod in k.json("get", "pods", "-l", REDIS_LABEL)["items"]:
            conditions = pod.get("status", {}).get("conditions") or []
            if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
                return str(pod["metadata"]["name"])
        return None

    try:
        pod = wait_until(ready_pod, timeout=120, interval=1, what="the Redis pod to be Ready")
    except AssertionError:
        print(k.run("describe", "pods", "-l", REDIS_LABEL, check=False).stdout)
        raise
    return Queue(k, pod, image)


# ------------------------------------------------------------------ the worker ParallelJob


def worker_template(
    image: str, *flags: str, shared_pids: bool = False, **env: str
) -> dict[str, Any]:
    """The example's worker pod template, running TASK, with ``flags`` after the example's
    worker options and ``env`` added."""
    [pj] = _example("multi-workqueue-job.yaml")
    template: dict[str, Any] = copy.deepcopy(pj["spec"]["template"])
    spec = template["spec"]
    [container] = spec["containers"]
    run_task(container, image, *flags, **env)
    if shared_pids:
        spec["shareProcessNamespace"] = True
    return template


def run_task(container: dict[str, Any], image: str, *flags: str, **env: str) -> None:
    """Makes an example's worker container run TASK from ``image``, with ``flags`` after the
    example's worker options and ``env`` added."""
    assert container["command"][:5] == [
        "paralleljob-worker",
        "--redis",
        "$(REDIS_URL)",
        "--stream",
        STREAM,
    ], container["command"]
    container["image"] = image
    # The example's options, then the test's (argparse: the last one given wins).
    options = container["command"][: container["command"].index("--")]
    container["command"] = [*options, *flags, "--", "python3", "-c", TASK]
    container["env"] += [{"name": name, "value": value} for name, value in env.items()]


def show(k: Kubectl, name: str, when: str) -> None:
    print(f"\n$ kubectl get pj {name}   # {when}\n{k.get_pj_text(name)}", end="")


def finished(k: Kubectl, name: str, timeout: float = 300) -> str:
    return wait_until(lambda: k.finished(name), timeout=timeout, interval=1, what=f"{name} done")
