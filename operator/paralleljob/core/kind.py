"""The seam for a second kind of job: everything the operator does differently for one
kind of job object lives in a :class:`JobKind`, which the shell and the pod builder
take. The core's decisions (sync.py and the policies) are the same for every kind.

A kind names its API (group, version, plural, status subresource), the keys of the
labels and annotations it puts on its pods, its tracking finalizer, the owner
reference its pods carry, the spec defaults the operator writes, and whether its
printed DURATION needs the operator to write ``status.durationText``. ParallelJob is
the one kind today; a batch/v1 Job adapter is a second instance of the same class
(``batch``, ``v1``, ``jobs``, the ``batch.kubernetes.io/`` keys), not a fork of the
shell.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .. import constants as c
from ..json_types import JsonDict
from .model import spec_defaults_patch


@dataclass(frozen=True)
class JobKind:
    group: str
    version: str
    plural: str
    kind: str
    #: The prefix of the pod labels and annotations: ``<prefix>/job-name``,
    #: ``<prefix>/controller-uid``, ``<prefix>/job-completion-index``, ...
    key_prefix: str
    #: The tracking finalizer on the kind's pods.
    finalizer: str
    #: The spec fields the operator writes when the API server did not default them.
    spec_defaults: Callable[[Mapping[str, Any]], JsonDict | None]
    #: Whether ``status.durationText`` must be refreshed for DURATION to show (a CRD's
    #: printer columns cannot compute it; the API server prints a Job's itself).
    refresh_duration: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def job_name_label(self) -> str:
        return f"{self.key_prefix}/job-name"

    @property
    def controller_uid_label(self) -> str:
        return f"{self.key_prefix}/controller-uid"

    @property
    def completion_index_key(self) -> str:
        """The completion index's annotation, and label, on an Indexed job's pods."""
        return f"{self.key_prefix}/job-completion-index"

    @property
    def index_failure_count_key(self) -> str:
        return f"{self.key_prefix}/job-index-failure-count"

    @property
    def index_ignored_failure_count_key(self) -> str:
        return f"{self.key_prefix}/job-index-ignored-failure-count"

    def selector(self, uid: str) -> str:
        """The label selector (string form) of a job's pods, exposed through /scale."""
        return f"{self.controller_uid_label}={uid}"

    def path(self, namespace: str, name: str = "", subresource: str = "") -> str:
        """The API path of the kind's objects in ``namespace``: all of them, one, or
        one's subresource (``status``)."""
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        path = f"{root}/namespaces/{namespace}/{self.plural}"
        path += f"/{name}" if name else ""
        return path + (f"/{subresource}" if subresource else "")

    def owner_reference(self, name: str, uid: str) -> JsonDict:
        """The controller reference a job's pods carry (blockOwnerDeletion, as upstream)."""
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": name,
            "uid": uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }


PARALLELJOB = JobKind(
    group=c.GROUP,
    version=c.VERSION,
    plural=c.PLURAL,
    kind=c.KIND,
    key_prefix=c.GROUP,
    finalizer=c.TRACKING_FINALIZER,
    spec_defaults=spec_defaults_patch,
    refresh_duration=True,
)
