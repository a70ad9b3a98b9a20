"""Helpers for the end-to-end tests: the pinned kubectl, ParallelJob manifests, reading
`kubectl get pj` exactly as a person sees it, and a pod watch that checks invariants on
every event; and the check that a test's namespace holds no Warning Event it did not
declare."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, Self

import pytest
from kubernetes import client, config
from kubernetes.client import ApiException
from urllib3.exceptions import HTTPError

from tests.support.background import Background
from tests.support.wait import wait_until
from tests.support.warning_events import MARKER, describe, unexpected_warnings

FINALIZER = "paralleljob.dev/tracking"
JOB_LABEL = "paralleljob.dev/job-name"
BUSYBOX = "busybox:1.35.0"
KWOK_TOLERATION = {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}


def kubectl(
    *args: str, check: bool = True, input: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        ["kubectl", *args], capture_output=True, text=True, input=input, timeout=timeout
    )
    if check and result.returncode != 0:
        command = " ".join(args)
        output = result.stdout + result.stderr
        raise AssertionError(f"kubectl {command} failed ({result.returncode}):\n{output}")
    return result


def busybox_template(command: str, *, restart_policy: str = "Never") -> dict[str, Any]:
    """A pod on the real node: busybox from the node's image store, 1s grace period."""
    return {
        "spec": {
            "restartPolicy": restart_policy,
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "main",
                    "image": BUSYBOX,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["sh", "-c", command],
                }
            ],
        }
    }


def kwok_template(duration: str = "2s", exit_code: int = 0) -> dict[str, Any]:
    """A pod on the kwok node: it 'runs' for ``duration`` and exits with ``exit_code``."""
    return {
        "metadata": {
            "annotations": {
                "kwok.paralleljob.dev/duration": duration,
                "kwok.paralleljob.dev/exit-code": str(exit_code),
            }
        },
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": {"type": "kwok"},
            "tolerations": [KWOK_TOLERATION],
            "containers": [{"name": "main", "image": BUSYBOX}],
        },
    }


@dataclass(frozen=True)
class Row:
    """One row of `kubectl get pj`, split by the header's column positions."""

    name: str
    status: str
    completions: str
    duration: str
    age: str


def parse_table(text: str) -> list[dict[str, str]]:
    lines = [line for line in text.splitlines() if line.strip()]
    header = lines[0]
    starts = [m.start() for m in re.finditer(r"\S+", header)]
    names = header.split()
    rows = []
    for line in lines[1:]:
        cells = {}
        for i, name in enumerate(names):
            end = starts[i + 1] if i + 1 < len(starts) else len(line)
            cells[name] = line[starts[i] : end].strip()
        rows.append(cells)
    return rows


_CLIENTS: dict[str, client.ApiClient] = {}
#: The kinds Kubectl.json reads through the API client: (group, version, plural).
_POLLED = {
    **dict.fromkeys(
        ("pj", "paralleljob", "paralleljobs"), ("paralleljob.dev", "v1alpha1", "paralleljobs")
    ),
    **dict.fromkeys(
        ("pcj", "parallelcronjob", "parallelcronjobs"),
        ("paralleljob.dev", "v1alpha1", "parallelcronjobs"),
    ),
    **dict.fromkeys(("job", "jobs"), ("batch", "v1", "jobs")),
    **dict.fromkeys(("pod", "pods"), ("", "v1", "pods")),
    "events": ("", "v1", "events"),
}


def api_client() -> client.ApiClient:
    """One API client per kubeconfig ($KUBECONFIG, the session's) for the reads tests
    poll: a kubectl process costs 0.1-0.2 s of CPU, and the polls made kubectl a third of
    all the CPU make test's first pass used (measured: more than kube-apiserver's)."""
    path = os.environ["KUBECONFIG"]
    if path not in _CLIENTS:
        _CLIENTS[path] = config.new_client_from_config(config_file=path)
    return _CLIENTS[path]


def _read(what: str, call: Callable[[], Any]) -> Any:
    """``call``'s JSON answer as kubectl -o json prints it; a failure is an
    AssertionError, as a failed kubectl is (kubectl())."""
    try:
        answer = call()
    except ApiException as exc:
        raise AssertionError(f"{what} failed ({exc.status}): {exc.body}") from exc
    except HTTPError as exc:
        raise AssertionError(f"{what} failed: {exc}") from exc
    return json.loads(answer.data)


class Kubectl:
    """kubectl in one namespace (its hottest reads through the API client instead)."""

    def __init__(self, namespace: str) -> None:
        self.ns = namespace

    def run(
        self, *args: str, check: bool = True, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return kubectl("-n", self.ns, *args, check=check, input=input)

    def json(self, *args: str) -> Any:
        """``kubectl -o json ARGS``; a plain get of one kind this suite polls (by name,
        or all, or by ``-l SELECTOR``) through the API client, with the same answer."""
        match args:
            case ("get", kind) if kind in _POLLED:
                return self._get(kind)
            case ("get", kind, name) if kind in _POLLED and kind != "events" and name[:1] != "-":
                return self._get(kind, name=name)
            case ("get", kind, "-l", selector) if kind in _POLLED:
                return self._get(kind, selector=selector)
        return json.loads(self.run(*args, "-o", "json").stdout)

    def _get(self, kind: str, *, name: str = "", selector: str = "") -> Any:
        group, version, plural = _POLLED[kind]
        what = f"get {kind} {name or selector} in {self.ns}"
        if group:
            custom = client.CustomObjectsApi(api_client())
            if name:
                return _read(what, lambda: custom.get_namespaced_custom_object(
                    group, version, self.ns, plural, name, _preload_content=False
                ))  # fmt: skip
            return _read(what, lambda: custom.list_namespaced_custom_object(
                group, version, self.ns, plural, label_selector=selector,
                _preload_content=False,
            ))  # fmt: skip
        core = client.CoreV1Api(api_client())
        if plural == "pods" and name:
            return _read(what, lambda: core.read_namespaced_pod(
                name, self.ns, _preload_content=False
            ))  # fmt: skip
        lister = core.list_namespaced_pod if plural == "pods" else core.list_namespaced_event
        return _read(what, lambda: lister(self.ns, label_selector=selector, _preload_content=False))

    def create_pj(self, name: str, template: dict[str, Any], **spec: Any) -> dict[str, Any]:
        return self._create("paralleljob.dev/v1alpha1", "ParallelJob", name, template, spec)

    def create_job(self, name: str, template: dict[str, Any], **spec: Any) -> dict[str, Any]:
        """A batch/v1 Job (``spec.managedBy`` says who runs it)."""
        return self._create("batch/v1", "Job", name, template, spec)

    def _create(
        self, api_version: str, kind: str, name: str, template: dict[str, Any], spec: Any
    ) -> dict[str, Any]:
        body = {
            "apiVersion": api_version,
            "kind": kind,
            "metadata": {"name": name},
            "spec": {**spec, "template": template},
        }
        self.run("create", "-f", "-", input=json.dumps(body))
        return body

    def pj(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self._get("pj", name=name)
        return result

    def status(self, name: str) -> dict[str, Any]:
        return dict(self.pj(name).get("status") or {})

    def get_pj_text(self, name: str) -> str:
        """`kubectl get pj NAME`, verbatim."""
        return self.run("get", "pj", name).stdout

    def row(self, name: str) -> Row:
        [cells] = parse_table(self.get_pj_text(name))
        return Row(
            cells["NAME"], cells["STATUS"], cells["COMPLETIONS"], cells["DURATION"], cells["AGE"]
        )

    def pods(self, job: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self._get("pods", selector=f"{JOB_LABEL}={job}")["items"]
        return items

    def patch_pj(
        self, name: str, patch: dict[str, Any], *, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        return self.run("patch", "pj", name, "--type=merge", "-p", json.dumps(patch), check=check)

    def condition(self, name: str, ctype: str) -> dict[str, Any] | None:
        for cond in self.status(name).get("conditions") or []:
            if cond.get("type") == ctype:
                return dict(cond)
        return None

    def finished(self, name: str) -> str | None:
        """'Complete' or 'Failed' once the job has that condition True."""
        for cond in self.status(name).get("conditions") or []:
            if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
                return str(cond["type"])
        return None


def phase(pod: dict[str, Any]) -> str:
    return str(pod.get("status", {}).get("phase", "Pending"))


def terminated(pod: dict[str, Any]) -> dict[str, Any]:
    """The state of the pod's (first) container once it has ended, else {}."""
    statuses = pod.get("status", {}).get("containerStatuses") or [{}]
    return dict(statuses[0].get("state", {}).get("terminated") or {})


def held(pods: list[dict[str, Any]]) -> list[str]:
    """Names of pods still carrying the tracking finalizer."""
    return [
        p["metadata"]["name"] for p in pods if FINALIZER in (p["metadata"].get("finalizers") or [])
    ]


@dataclass
class PodWatch(Background):
    """Watches a job's pods and checks an invariant after every event.

    ``check(pods)`` gets the current pods by uid (as the watch shows them) and returns
    an error message or None. Errors are collected, not raised, from the watch thread.
    """

    core_v1: Any
    namespace: str
    job: str
    check: Callable[[dict[str, dict[str, Any]]], str | None] | None = None
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    created: list[str] = field(default_factory=list)
    #: When the watch first showed each pod of ``created`` (time.monotonic()).
    created_at: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    #: Keep watching through API server outages (chaos tests) instead of failing.
    survive_outages: bool = False
    max_active: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _ready: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def snapshot(self) -> list[dict[str, Any]]:
        """The pods as the watch last saw them (safe to call from the test thread)."""
        with self._lock:
            return list(self.pods.values())

    def __enter__(self) -> Self:
        super().__enter__()
        self._ready.wait(timeout=30)
        return self

    def _run(self) -> None:
        from kubernetes import watch

        rv = None
        while not self._stop.is_set():
            w = watch.Watch()
            kwargs: dict[str, Any] = {
                "label_selector": f"{JOB_LABEL}={self.job}",
                "timeout_seconds": 2,
            }
            if rv:
                kwargs["resource_version"] = rv
            else:
                try:
                    rv = self._relist(kwargs["label_selector"])
                except Exception as exc:
                    if not self._outage(exc):
                        return
                    continue
                self._ready.set()
                continue
            try:
                for event in w.stream(self.core_v1.list_namespaced_pod, self.namespace, **kwargs):
                    obj = self.core_v1.api_client.sanitize_for_serialization(event["object"])
                    rv = obj["metadata"]["resourceVersion"]
                    self._apply(event["type"], obj)
                    if self._stop.is_set():
                        break
            except Exception as exc:  # a 410 Gone: list again
                if "410" in str(exc) or "Expired" in str(exc):
                    rv = None
                    continue
                if not self._outage(exc):
                    return
                rv = None

    def _relist(self, selector: str) -> str:
        """Lists the pods, replacing what the watch knew; returns the list's version."""
        listed = self.core_v1.list_namespaced_pod(self.namespace, label_selector=selector)
        pods = [self.core_v1.api_client.sanitize_for_serialization(p) for p in listed.items]
        with self._lock:
            listed_uids = {p["metadata"]["uid"] for p in pods}
            for uid in [u for u in self.pods if u not in listed_uids]:
                del self.pods[uid]
            for pod in pods:
                self._apply_locked("ADDED", pod)
        return str(listed.metadata.resource_version)

    def _outage(self, exc: Exception) -> bool:
        """Whether to go on after ``exc``: only while surviving outages (then after a
        pause, so that a down API server is not hammered)."""
        if not self.survive_outages:
            self.errors.append(f"watch failed: {exc}")
            return False
        self._stop.wait(0.5)
        return True

    def _apply(self, type_: str, pod: dict[str, Any]) -> None:
        with self._lock:
            self._apply_locked(type_, pod)

    def _apply_locked(self, type_: str, pod: dict[str, Any]) -> None:
        uid = pod["metadata"]["uid"]
        if type_ == "DELETED":
            self.pods.pop(uid, None)
        else:
            if uid not in self.pods and uid not in self.created:
                self.created.append(uid)
                self.created_at.append(time.monotonic())
            self.pods[uid] = pod
        active = sum(1 for p in self.pods.values() if is_active(p))
        self.max_active = max(self.max_active, active)
        if self.check is not None:
            error = self.check(self.pods)
            if error:
                self.errors.append(error)


def is_active(pod: dict[str, Any]) -> bool:
    return phase(pod) not in ("Succeeded", "Failed") and not pod["metadata"].get(
        "deletionTimestamp"
    )


class Killable(Protocol):
    def restart(self) -> None:
        """SIGKILLs the operator process and starts a new one."""


def kill_operator_as_pods_finish(
    operator: Killable,
    k: Kubectl,
    watch: PodWatch,
    name: str,
    *,
    thresholds: Sequence[int],
    phases: tuple[str, ...],
    timeout: float,
) -> int:
    """SIGKILLs the operator each time the job's pods in ``phases`` reach the next
    threshold, until the job finishes; returns how many kills happened."""
    kills = 0
    for threshold in thresholds:

        def reached(n: int = threshold) -> bool:
            done = [p for p in watch.snapshot() if phase(p) in phases]
            return len(done) >= n or k.finished(name) is not None

        wait_until(reached, timeout=timeout, what=f"{threshold} finished pods of {name}")
        if k.finished(name):
            break
        operator.restart()
        kills += 1
    return kills


def expected_warnings(node: pytest.Item | pytest.Collector) -> set[str]:
    """The Warning reasons ``node`` (a test, or a module for a module's fixture) declares
    with ``@pytest.mark.warnings(...)``: its own, its class's and its module's."""
    reasons = {reason for mark in node.iter_markers(MARKER) for reason in mark.args}
    wrong = sorted(repr(r) for r in reasons if not isinstance(r, str) or not r)
    assert not wrong, f"{node.nodeid}: @pytest.mark.{MARKER} takes reasons (strings): {wrong}"
    return reasons


def assert_quiet(namespace: str, expected: Iterable[str]) -> None:
    """Fails the test when ``namespace`` holds a Warning Event whose reason is not in
    ``expected``: a happy path is quiet, and a test names the Warnings it causes.

    Events still on their way (a recorder posts them asynchronously) are not waited
    for: what the API server holds now is judged."""
    allowed = set(expected)
    listed = json.loads(
        kubectl(
            "get", "events", "-n", namespace, "--field-selector", "type=Warning", "-o", "json"
        ).stdout
    )
    found = unexpected_warnings(listed, allowed)
    if found:
        pytest.fail(describe(namespace, found, allowed), pytrace=False)
