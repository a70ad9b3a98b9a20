"""manifests/examples/workqueue, read as files: its contract with the image, the preloaded Redis
and ``make demo``, and the producer's and the workers' exact commands run here against a real
redis-server (the pods' image has the same console scripts and redis-py on PATH). On the
cluster, tests/e2e/test_workqueue.py runs them for real."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import redis
import yaml

from paralleljob.worker.cli import parse_work_args

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "manifests" / "examples" / "workqueue"
WORKQUEUES = ("multi-workqueue-job.yaml", "single-workqueue-job.yaml")
OPERATOR_IMAGE = "paralleljob-operator:dev"
BIN = Path(sys.executable).parent


def docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((EXAMPLE / name).read_text()) if d]


def pod_spec(doc: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = doc["spec"]["template"]["spec"]
    return spec


def container(doc: dict[str, Any]) -> dict[str, Any]:
    [only] = pod_spec(doc)["containers"]
    return dict(only)


def env_of(c: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in c.get("env", []) if "value" in e}


def expand(args: list[str], env: dict[str, str]) -> list[str]:
    """The kubelet's $(VAR) expansion of a container's command."""
    return [re.sub(r"\$\((\w+)\)", lambda m: env.get(m[1], m[0]), a) for a in args]


def test_the_kustomization_is_redis_and_the_producer_not_the_workers() -> None:
    kustomization = yaml.safe_load((EXAMPLE / "kustomization.yaml").read_text())
    assert kustomization["resources"] == ["redis.yaml", "enqueue-job.yaml"]
    kinds = sorted(d["kind"] for name in kustomization["resources"] for d in docs(name))
    assert kinds == ["Deployment", "Job", "Service"]
    for name in WORKQUEUES:
        assert [d["kind"] for d in docs(name)] == ["ParallelJob"]


def test_images_are_the_operator_image_and_the_preloaded_redis() -> None:
    build_image = (REPO / "hack" / "images" / "build_image.py").read_text()
    tag = re.search(r'^REDIS_TAG = "(.+)"', build_image, re.M)
    assert tag is not None
    [deployment, service] = docs("redis.yaml")
    redis_container = container(deployment)
    assert redis_container["image"] == f"redis:{tag[1]}"
    assert redis_container["readinessProbe"]["exec"]["command"] == ["redis-cli", "ping"]
    assert service["metadata"]["name"] == "redis"
    assert service["spec"]["ports"][0]["port"] == 6379
    for name in ("enqueue-job.yaml", *WORKQUEUES):
        c = container(docs(name)[0])
        assert (c["image"], c["imagePullPolicy"]) == (OPERATOR_IMAGE, "IfNotPresent"), name
    for doc in [deployment] + [docs(n)[0] for n in ("enqueue-job.yaml", *WORKQUEUES)]:
        assert pod_spec(doc)["securityContext"]["runAsNonRoot"] is True
        assert container(doc)["securityContext"]["readOnlyRootFilesystem"] is True


def test_the_workers_run_a_valid_worker_command_line() -> None:
    for name in WORKQUEUES:
        [pj] = docs(name)
        assert "completions" not in pj["spec"], "a work queue leaves completions unset"
        c = container(pj)
        command = expand(c["command"], env_of(c))
        assert command[0] == "paralleljob-worker"
        args = parse_work_args(command[1:])
        assert (args.redis, args.stream) == ("redis://redis:6379/0", "items")
        assert args.command[:2] == ["python3", "-c"]
        compile(args.command[2], f"{name} task", "exec")
        # The consumer name is the pod's, from the downward API.
        [pod_name] = [e for e in c["env"] if e["name"] == "POD_NAME"]
        assert pod_name["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
        # A stopped worker hands its item back before the kubelet's SIGKILL.
        assert pod_spec(pj)["terminationGracePeriodSeconds"] > args.grace_seconds
        assert pod_spec(pj)["restartPolicy"] == "Never"


def test_the_two_work_queues_differ_only_in_name_and_parallelism() -> None:
    [multi], [single] = (docs(n) for n in WORKQUEUES)
    assert (multi["spec"]["parallelism"], single["spec"]["parallelism"]) == (3, 1)
    for pj in (multi, single):
        name = pj["metadata"]["name"]
        assert pj["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"] == name
        pj["metadata"]["name"] = pj["spec"]["template"]["metadata"]["labels"] = None
        del pj["spec"]["parallelism"]
    assert multi == single


def test_make_demo_tells_the_example_s_story() -> None:
    demo = (REPO / "hack" / "demo.sh").read_text()
    [job] = docs("enqueue-job.yaml")
    env = env_of(container(job))
    first, last = int(env["FIRST"]), int(env["LAST"])
    assert f"enqueues {last - first + 1} items" in demo
    # The second batch follows the first.
    assert f"seq -f item-%03g {last + 1} " in demo
    for name in WORKQUEUES:
        assert f'"$WORKQUEUE/{name}"' in demo
    assert 'check multi-workqueue-job "3/1 of 3"' in demo
    assert 'check single-workqueue-job "2/1 of 2"' in demo


def test_the_producer_and_three_workers_run_as_written(
    redis_url: str, client: redis.Redis, tmp_path: Path
) -> None:
    path = f"{BIN}{os.pathsep}{os.environ['PATH']}"
    [job] = docs("enqueue-job.yaml")
    producer = container(job)
    env = {**env_of(producer), "REDIS_URL": redis_url, "LAST": "6"}
    done = subprocess.run(
        expand(producer["command"], env),
        env={**os.environ, **env, "PATH": path},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert "enqueued 6 items to items" in done.stderr
    items = [f"item-{i:03d}" for i in range(1, 7)]

    [pj] = docs("multi-workqueue-job.yaml")
    worker = container(pj)
    env = {**env_of(worker), "REDIS_URL": redis_url}
    workers = []
    for i in range(pj["spec"]["parallelism"]):
        with (tmp_path / f"w{i}.log").open("wb") as log:
            workers.append(
                subprocess.Popen(
                    expand(worker["command"], env),
                    env={**os.environ, **env, "POD_NAME": f"w{i}", "PATH": path},
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                )
            )
    codes = [w.wait(timeout=60) for w in workers]
    logs = [(tmp_path / f"w{i}.log").read_text() for i in range(len(workers))]
    assert codes == [0, 0, 0], logs
    assert all(log.splitlines()[-1] == "paralleljob-worker: queue items drained" for log in logs)
    fields = cast(dict[bytes, bytes], client.hgetall("results"))
    results = {k.decode(): v.decode() for k, v in fields.items()}
    assert results == {i: hashlib.sha256(i.encode()).hexdigest() for i in items}
