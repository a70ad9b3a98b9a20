"""spec.managedBy: whether a job is this operator's to reconcile.

Ports ``managedByExternalController`` (``pkg/controller/job/job_controller.go``,
Kubernetes v1.37.2), as with the ``JobManagedBy`` gate on (GA and locked on since
v1.35): a job whose
spec.managedBy names a controller the operator does not play for its kind
(:attr:`~.kind.JobKind.controllers`: for a ParallelJob, unset or
:data:`~paralleljob.constants.MANAGED_BY`; for a batch/v1 Job, the operator's value, and
with ``PJ_MANAGE_JOBS=all`` also unset or the built-in's) belongs to another controller
(MultiKueue, the built-in Job controller, say), and the operator leaves it alone
entirely: it creates and deletes no pod, writes neither the job's spec defaults nor its
status, and removes no finalizer (``syncJob`` returns at once).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ... import constants as c
from .kind import PARALLELJOB, JobKind


def managed_by_external_controller(
    spec: Mapping[str, Any], kind: JobKind = PARALLELJOB
) -> str | None:
    """The controller a job (its spec, batch/v1 JSON) belongs to when it is not this
    operator (an unset spec.managedBy: the built-in Job controller); None when the
    operator reconciles it."""
    if kind.reconciles(spec):
        return None
    name = spec.get("managedBy")
    return c.BUILTIN_JOB_CONTROLLER if name is None else str(name)
