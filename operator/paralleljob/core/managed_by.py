"""spec.managedBy: whether a job is this operator's to reconcile.

Ports ``managedByExternalController`` (``pkg/controller/job/job_controller.go``,
Kubernetes v1.34.4), as with the ``JobManagedBy`` gate on (in v1.34 it is beta and on by
default, not locked: upstream can be run with it off; the operator cannot): a job whose
spec.managedBy is set to anything but the operator's own value
(:data:`~paralleljob.constants.MANAGED_BY`) belongs to another controller (MultiKueue,
say), and the operator leaves it alone entirely: it creates and deletes no pod, writes
neither the job's spec defaults nor its status, and removes no finalizer (``syncJob``
returns at once).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import constants as c


def managed_by_external_controller(spec: Mapping[str, Any]) -> str | None:
    """The controller named by ``spec.managedBy`` (the job's spec, batch/v1 JSON) when it
    is not this operator; None when the job is the operator's (unset, or its value)."""
    name = spec.get("managedBy")
    if name is None or name == c.MANAGED_BY:
        return None
    return str(name)
