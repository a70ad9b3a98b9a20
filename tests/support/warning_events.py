"""A happy path is quiet: the Warning Events of a test's namespace that the test did not
declare with ``@pytest.mark.warnings("Reason", ...)``. Pure: the caller lists the Events
(``kubectl get events -o json``); tests/e2e/conftest.py fails a test that leaves any."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: The marker a test declares the Warning reasons it expects with.
MARKER = "warnings"

#: Warnings a busy test machine causes whatever the test does, by reason and message; kept
#: as narrow as the message allows, so that the same reason for anything else still fails.
#: The kubelet mounts every pod's service account token volume (``kube-api-access-*``,
#: with the namespace's ``kube-root-ca.crt``) from a ConfigMap watch of its own; on a loaded
#: API server that watch may not sync before its timeout, the kubelet says so and retries,
#: and the pod starts a moment later.
#: A readiness probe that fails while its container starts (the tests' Redis before it
#: listens) is what the probe is for: the pod is not Ready yet; a liveness or startup
#: probe's failure still fails the test.
#: The kubelet's token request for a pod it was just bound, refused by the node authorizer
#: whose graph has not seen the binding yet ("scheduled on a different node"): it retries,
#: and the pod starts a moment later.
#: KEDA's ScaledJob controller, when the test deletes its ScaledJob while it creates a
#: Job, has its request's context cancelled, before the request leaves (its rate
#: limiter's wait) or while it is in flight (the POST): nothing was refused (a refusal,
#: RBAC's or the API server's, still fails the test).
TOLERATED: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("Unhealthy", re.compile(r"Readiness probe failed: .*", re.S)),
    (
        "KEDAJobCreateFailed",
        re.compile(
            r"Failed to create job \S+: (client rate limiter Wait returned an error"
            r'|Post "https://[^"\s]+/apis/batch/v1/namespaces/[a-z0-9-]+/jobs"): '
            r"context canceled"
        ),
    ),
    (
        "FailedMount",
        re.compile(
            r'MountVolume\.SetUp failed for volume "kube-api-access-[a-z0-9]+" : '
            r"failed to sync configmap cache: timed out waiting for the condition"
        ),
    ),
    (
        "FailedMount",
        re.compile(
            r'MountVolume\.SetUp failed for volume "kube-api-access-[a-z0-9]+" : '
            r'failed to fetch token: serviceaccounts "default" is forbidden: '
            r"node requested token bound to a pod scheduled on a different node"
        ),
    ),
)


@dataclass(frozen=True)
class WarningEvent:
    """One Warning Event, as much of it as a person needs to tell what happened."""

    reason: str
    kind: str
    name: str
    message: str
    count: int

    def __str__(self) -> str:
        times = "" if self.count == 1 else f" (x{self.count})"
        return f"{self.reason}: {self.kind}/{self.name}{times}: {self.message}"


def _count(event: Mapping[str, Any]) -> int:
    # An Event posted through events.k8s.io/v1 shows in core/v1 with its repetitions in
    # series.count and no count of its own; one posted through core/v1 has count.
    series = event.get("series") or {}
    return int(event.get("count") or series.get("count") or 1)


def tolerated(warning: WarningEvent) -> bool:
    """Whether ``warning`` is one of TOLERATED: the machine's, not the test's."""
    return any(
        warning.reason == reason and pattern.fullmatch(warning.message)
        for reason, pattern in TOLERATED
    )


def unexpected_warnings(events: Mapping[str, Any], expected: Iterable[str]) -> list[WarningEvent]:
    """The Warning Events of ``events`` (an EventList as JSON) whose reason is not in
    ``expected`` and which are not TOLERATED, in the order listed. Normal Events never
    count, whatever their reason."""
    allowed = set(expected)
    found = []
    for event in events.get("items") or []:
        if event.get("type") != "Warning" or event.get("reason") in allowed:
            continue
        involved = event.get("involvedObject") or event.get("regarding") or {}
        warning = WarningEvent(
            reason=str(event.get("reason") or ""),
            kind=str(involved.get("kind") or "?"),
            name=str(involved.get("name") or "?"),
            message=str(event.get("message") or event.get("note") or "").strip(),
            count=_count(event),
        )
        if not tolerated(warning):
            found.append(warning)
    return found


def describe(namespace: str, warnings: list[WarningEvent], expected: Iterable[str]) -> str:
    """The failure's message: each unexpected Warning on a line, and how to declare one."""
    declared = ", ".join(sorted(set(expected))) or "none"
    lines = [
        f"{len(warnings)} unexpected Warning Event(s) in namespace {namespace} "
        f"(expected reasons: {declared}); a test that means to cause one declares it "
        f'with @pytest.mark.{MARKER}("Reason", ...):',
        *(f"  {w}" for w in warnings),
    ]
    return "\n".join(lines)
