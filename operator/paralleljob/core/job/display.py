"""What `kubectl get pj` prints: the same strings kubectl's printJob computes for Jobs.

A CRD's printer columns can only read JSONPaths, so the operator writes these strings
into status (statusText, completionsText, durationText) and keeps them current; the
wide columns' containersText and imagesText come from the template
(``model.template_texts``, kubectl's layoutContainerCells) and never change.
"""

from __future__ import annotations

import math
from datetime import datetime

from ... import constants as c
from .model import JobSpec, JobStatus, has_true_condition


def human_duration(seconds: float) -> str:
    """k8s.io/apimachinery/pkg/util/duration.HumanDuration, for a duration in seconds."""
    whole = int(seconds)  # Go truncates toward zero, as int() does
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 60 * 2:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        secs = whole % 60
        return f"{minutes}m" if secs == 0 else f"{minutes}m{secs}s"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        mins = minutes % 60
        return f"{hours}h" if mins == 0 else f"{hours}h{mins}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rem = hours % 24
        return f"{hours // 24}d" if rem == 0 else f"{hours // 24}d{rem}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        years = hours // 24 // 365
        return f"{years}y" if days == 0 else f"{years}y{days}d"
    return f"{hours // 24 // 365}y"


def seconds_until_change(seconds: float) -> float:
    """How long until ``human_duration`` of a growing duration prints something else."""
    whole = int(seconds)
    if whole < 60 * 10:
        step = 1
    elif whole < 3600 * 3:
        step = 60
    elif whole < 3600 * 48:
        step = 60 if whole < 3600 * 8 else 3600
    elif whole < 86400 * 365 * 8:
        step = 3600 if whole < 86400 * 8 else 86400
    else:
        step = 86400
    next_boundary = (math.floor(seconds / step) + 1) * step
    return max(next_boundary - seconds, 0.001)


def completions_text(spec: JobSpec, succeeded: int) -> str:
    """printJob's COMPLETIONS: ``2/5``; ``0/1 of 3`` for a work queue; ``3/1``."""
    if spec.completions is not None:
        return f"{succeeded}/{spec.completions}"
    if spec.parallelism > 1:
        return f"{succeeded}/1 of {spec.parallelism}"
    return f"{succeeded}/1"


def status_text(status: JobStatus, deleting: bool) -> str:
    """printJob's STATUS: Complete, Failed, Terminating, Suspended, FailureTarget,
    SuccessCriteriaMet, Running."""
    if has_true_condition(status.conditions, c.COND_COMPLETE):
        return "Complete"
    if has_true_condition(status.conditions, c.COND_FAILED):
        return "Failed"
    if deleting:
        return "Terminating"
    if has_true_condition(status.conditions, c.COND_SUSPENDED):
        return "Suspended"
    if has_true_condition(status.conditions, c.COND_FAILURE_TARGET):
        return "FailureTarget"
    if has_true_condition(status.conditions, c.COND_SUCCESS_CRITERIA_MET):
        return "SuccessCriteriaMet"
    return "Running"


def duration_seconds(status: JobStatus, now: datetime) -> float | None:
    if status.start_time is None:
        return None
    end = status.completion_time if status.completion_time is not None else now
    return (end - status.start_time).total_seconds()


def duration_text(status: JobStatus, now: datetime) -> str:
    """printJob's DURATION: completion - start, or time since start; blank without start."""
    seconds = duration_seconds(status, now)
    return "" if seconds is None else human_duration(seconds)


def refresh_in(status: JobStatus, now: datetime) -> float | None:
    """Seconds until DURATION prints differently; None once it is fixed.

    Like kubectl, a job without completionTime (running, or failed) keeps counting.
    """
    if status.start_time is None or status.completion_time is not None:
        return None
    return seconds_until_change((now - status.start_time).total_seconds())
