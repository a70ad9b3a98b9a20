"""The fuzz tests' side of the cluster: the ParallelJob endpoints as a user's client calls
them, what a job settles to, and the operator's log read for tracebacks."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes.client import ApiException

from tests.e2e.conftest import Operator
from tests.e2e.support import FINALIZER, Kubectl
from tests.support.wait import ConditionTimeout, wait_until

from .inputs import GROUP, PLURAL, VERSION, Json, effective_counts, pods_wanted

TRACEBACK = "Traceback (most recent call last)"
#: How long an accepted example may take to reach its terminal or steady state.
SETTLE_SECONDS = 60.0

#: Why a valid job may fail: its back-off limit, its deadline, its pod failure policy,
#: its failed indexes (per-index back-off), too many of them.
FAILED_REASONS = (
    "BackoffLimitExceeded",
    "DeadlineExceeded",
    "PodFailurePolicy",
    "FailedIndexes",
    "MaxFailedIndexesExceeded",
)


@dataclass(frozen=True)
class Answer:
    """The API server's answer: the object it stored (or would store), or its refusal."""

    code: int
    message: str = ""
    obj: Json = None

    @property
    def accepted(self) -> bool:
        return 200 <= self.code < 300


def _refusal(exc: ApiException) -> Answer:
    """The Status the API server answered with: its message is what kubectl prints."""
    try:
        status = json.loads(exc.body or "")
    except ValueError:
        status = None
    message = status.get("message") if isinstance(status, dict) else None
    return Answer(int(exc.status or 0), str(message or exc.body or exc.reason))


class JobApi:
    """ParallelJobs in one namespace through the ``kubernetes`` client, with strict field
    validation as kubectl sends it by default (an unknown field is an error, not a
    warning)."""

    def __init__(self, objects: Any, namespace: str) -> None:
        self.objects = objects
        self.ns = namespace

    def _options(self, dry_run: bool) -> dict[str, str]:
        options = {"field_validation": "Strict"}
        if dry_run:
            options["dry_run"] = "All"
        return options

    def create(self, body: Json, *, dry_run: bool = False) -> Answer:
        try:
            obj = self.objects.create_namespaced_custom_object(
                GROUP, VERSION, self.ns, PLURAL, body, **self._options(dry_run)
            )
        except ApiException as exc:
            return _refusal(exc)
        return Answer(201, obj=obj)

    def patch(self, name: str, patch: Json, *, dry_run: bool = False) -> Answer:
        try:
            obj = self.objects.patch_namespaced_custom_object(
                GROUP,
                VERSION,
                self.ns,
                PLURAL,
                name,
                patch,
                _content_type="application/merge-patch+json",
                **self._options(dry_run),
            )
        except ApiException as exc:
            return _refusal(exc)
        return Answer(200, obj=obj)

    def get(self, name: str) -> Json | None:
        try:
            return self.objects.get_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def delete(self, name: str, *, propagation: str = "Background") -> None:
        try:
            self.objects.delete_namespaced_custom_object(
                GROUP, VERSION, self.ns, PLURAL, name, propagation_policy=propagation
            )
        except ApiException as exc:
            if exc.status != 404:
                raise

    def delete_and_wait(self, name: str) -> None:
        """Deleted: a ParallelJob has no finalizer, so it goes at once; its pods follow
        by garbage collection once the operator has released them."""
        self.delete(name)
        wait_until(lambda: self.get(name) is None, timeout=30, what=f"{name} deleted")


def check_refusal(answer: Answer, naming: Iterable[str], what: str) -> None:
    """Refused as invalid (422) or undecodable (400), with a message naming the field."""
    naming = tuple(naming)
    assert not answer.accepted, f"the API accepted {what}"
    assert answer.code in (400, 422), f"{what}: answered {answer.code}: {answer.message}"
    assert any(n in answer.message for n in naming), (
        f"{what}: the refusal names none of {naming}: {answer.message}"
    )


# ---------------------------------------------------------------- what a job settles to


def true_conditions(obj: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    status = obj.get("status") or {}
    return {
        c["type"]: c
        for c in status.get("conditions") or []
        if isinstance(c, dict) and c.get("status") == "True"
    }


def _terminal(obj: Mapping[str, Any]) -> str | None:
    """Complete or Failed, checked against the counts a finished job must show."""
    conditions = true_conditions(obj)
    status, spec = obj.get("status") or {}, obj["spec"]
    uncounted = status.get("uncountedTerminatedPods") or {}
    if "Complete" in conditions:
        if conditions["Complete"].get("reason") == "SuccessPolicy":
            # Met by the indexes it names: fewer than completions may have succeeded.
            assert "successPolicy" in spec, f"Complete by a success policy without one: {status}"
        else:
            _, completions = effective_counts(spec)
            wanted = 1 if completions is None else completions
            assert status.get("succeeded", 0) >= wanted, f"Complete with {status}"
    elif "Failed" in conditions:
        reason = conditions["Failed"].get("reason")
        assert reason in FAILED_REASONS, f"Failed: {reason}"
    else:
        return None
    assert not uncounted.get("succeeded") and not uncounted.get("failed"), status
    return "Complete" if "Complete" in conditions else "Failed"


def _steady(obj: Mapping[str, Any]) -> str | None:
    """Suspended, or idle at parallelism 0, once the operator has seen this generation."""
    status, spec = obj.get("status") or {}, obj["spec"]
    if status.get("observedGeneration", 0) < obj["metadata"].get("generation", 1):
        return None
    if status.get("active"):
        return None
    if spec.get("suspend") is True:
        return "Suspended" if "Suspended" in true_conditions(obj) else None
    parallelism, _ = effective_counts(spec)
    return "idle at parallelism 0" if parallelism == 0 else None


def _creation_failed(obj: Mapping[str, Any], naming: tuple[str, ...]) -> str | None:
    cond = true_conditions(obj).get("PodCreationFailed")
    if cond is None:
        return None
    message = str(cond.get("message", ""))
    assert cond.get("reason") == "FailedCreate", cond
    assert any(n in message for n in naming), f"PodCreationFailed names none of {naming}: {cond}"
    return "PodCreationFailed"


def outcome(obj: Mapping[str, Any] | None, pod_refused: tuple[str, ...]) -> str | None:
    """What the job has settled to, or None while it is still on its way.

    A job whose pods the API refuses (``pod_refused``) must report PodCreationFailed
    naming the field, unless it wants no pod or its deadline fails it first."""
    if obj is None:
        return None
    spec = obj["spec"]
    if pod_refused and pods_wanted(spec):
        terminal = _terminal(obj)
        if terminal is not None:
            assert terminal == "Failed", f"{terminal} without a pod: {obj.get('status')}"
            return terminal
        return _creation_failed(obj, pod_refused)
    return _terminal(obj) or _steady(obj)


def settle(
    api: JobApi,
    name: str,
    spec: Mapping[str, Any],
    pod_refused: tuple[str, ...] = (),
    log: OperatorLog | None = None,
) -> str:
    """Waits for the job's terminal or steady state and returns it. ``spec`` is the one
    the API server answered with: a job with a ttlSecondsAfterFinished may be gone
    before the first look, and that is an end too. With ``log``, a traceback in the
    operator's log fails at once rather than after the deadline."""

    def probe() -> str | None:
        if log is not None:
            log.check()
        obj = api.get(name)
        if obj is None:
            assert "ttlSecondsAfterFinished" in spec, f"{name} disappeared"
            return "deleted after ttlSecondsAfterFinished"
        return outcome(obj, pod_refused)

    try:
        return wait_until(probe, timeout=SETTLE_SECONDS, what=f"{name} terminal or steady")
    except ConditionTimeout as exc:
        raise ConditionTimeout(f"{exc}\n{_stuck(api, name, log)}") from None


def _stuck(api: JobApi, name: str, log: OperatorLog | None) -> str:
    """What a job that did not settle looks like: its status, and the operator's last
    log lines naming it (CI shows a failure's message, not the whole log)."""
    obj = api.get(name) or {}
    marks = tuple(f"/{name}{end}" for end in (" ", ":", ","))
    logged = log.operator.logs().splitlines() if log is not None else []
    lines = [line for line in logged if any(mark in line for mark in marks)]
    about = "\n".join(lines[-40:])
    return f"spec: {obj.get('spec')}\nstatus: {obj.get('status')}\noperator log:\n{about}"


# ---------------------------------------------------------------- the operator's health


class OperatorLog:
    """Reads the operator's log as it grows, for tracebacks since the last look."""

    def __init__(self, operator: Operator) -> None:
        self.operator = operator
        self.offsets: dict[Path, int] = {}

    def new_text(self) -> str:
        path = self.operator.log_path
        start = self.offsets.get(path, 0)
        with path.open("rb") as log:
            log.seek(start)
            data = log.read()
        self.offsets[path] = start + len(data)
        return data.decode(errors="replace")

    def check(self) -> None:
        """The operator still runs and logged no traceback since the last check."""
        text = self.new_text()
        assert TRACEBACK not in text, f"the operator logged a traceback:\n{excerpt(text)}"
        assert self.operator.running, f"the operator exited:\n{self.operator.logs()[-5000:]}"


def excerpt(text: str, before: int = 15, after: int = 40) -> str:
    """The lines around the first traceback in ``text``."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if TRACEBACK in line:
            return "\n".join(lines[max(0, i - before) : i + after])
    return "\n".join(lines[-after:])


def assert_no_traceback(operator: Operator) -> None:
    """Over every run of the operator in this test: no traceback, and still running."""
    logs = operator.logs()
    assert TRACEBACK not in logs, f"the operator logged a traceback:\n{excerpt(logs)}"
    assert operator.running, f"the operator exited:\n{logs[-5000:]}"


def held_pods(k: Kubectl) -> list[str]:
    """Pods of the namespace that still carry the tracking finalizer."""
    pods = k.json("get", "pods")["items"]
    return [
        p["metadata"]["name"] for p in pods if FINALIZER in (p["metadata"].get("finalizers") or [])
    ]


def events(core_v1: Any, namespace: str, name: str, reason: str) -> list[str]:
    """The messages of the Events about object ``name`` with ``reason``."""
    listed = core_v1.list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name},reason={reason}"
    )
    return [str(e.message) for e in listed.items]
