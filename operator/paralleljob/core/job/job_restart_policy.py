"""spec.restartPolicy as parsed, and the label of a restarted job's pods: the leaf that
the model reads them from (the decision is in :mod:`.job_restarts`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ... import constants as c
from .pod_failure_policy import REASON_POD_FAILURE_POLICY

#: The label on the pods of a restarted job: which attempt they belong to (1 for the
#: first restart's pods; none on the first attempt's, as a Job's pods have none).
ATTEMPT_LABEL: Final = f"{c.GROUP}/restart-attempt"

#: The Failed reasons a job-level restart may follow: every one upstream gives.
RESTARTABLE_REASONS: Final = (
    c.REASON_BACKOFF_LIMIT,
    c.REASON_DEADLINE,
    REASON_POD_FAILURE_POLICY,
    c.REASON_MAX_FAILED_INDEXES_EXCEEDED,
    c.REASON_FAILED_INDEXES,
)


@dataclass(frozen=True)
class JobRestartPolicy:
    """spec.restartPolicy: at most ``max_restarts`` restarts, after a Failed verdict
    whose reason is in ``on_failure_reasons``."""

    max_restarts: int
    on_failure_reasons: frozenset[str] = frozenset(RESTARTABLE_REASONS)


def parse_job_restart_policy(spec: Mapping[str, Any]) -> JobRestartPolicy | None:
    """spec.restartPolicy, None when unset or without a positive maxRestarts (the CRD's
    minimum is 1); onFailureReasons defaults to every reason."""
    raw = spec.get("restartPolicy")
    if not isinstance(raw, Mapping):
        return None
    max_restarts = raw.get("maxRestarts")
    if not isinstance(max_restarts, int) or isinstance(max_restarts, bool) or max_restarts < 1:
        return None
    reasons = raw.get("onFailureReasons")
    if not isinstance(reasons, list) or not reasons:
        return JobRestartPolicy(max_restarts)
    return JobRestartPolicy(max_restarts, frozenset(str(r) for r in reasons))


def attempt_of(labels: Mapping[str, Any]) -> int:
    """The attempt a pod belongs to, from its label (0: none, or not a number)."""
    value = labels.get(ATTEMPT_LABEL)
    if not isinstance(value, str) or not value.isascii() or not value.isdigit():
        return 0
    return int(value)


def attempt_labels(restarts: int) -> dict[str, str]:
    """The labels a pod of the attempt after ``restarts`` restarts gets: none on the
    first attempt, so that a job never restarted has a Job's pods."""
    return {ATTEMPT_LABEL: str(restarts)} if restarts else {}
