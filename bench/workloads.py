"""What the bench creates: the same pod template for every arm, as a Job (the built-in's,
or one whose ``spec.managedBy`` names the operator) or a ParallelJob."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

JsonDict = dict[str, Any]

# kwok's stages end a pod on the kwok node after this annotation's Go duration
# (hack/cluster/kwok-stages.yaml).
DURATION_ANNOTATION = "kwok.paralleljob.dev/duration"
INSTANT = "0s"
# Background and scale-up pods must outlive any round.
LONG = "24h"
IMAGE = "busybox:1.35.0"


class Arm(enum.Enum):
    """Who drives the pods of a round. The value names the arm (``--arms``, the JSON);
    :attr:`kind` is the kind of object it creates."""

    BUILTIN = "Job"
    OPERATOR = "ParallelJob"
    #: batch/v1 Jobs whose spec.managedBy names the operator (docs/jobs.md).
    OPERATOR_JOB = "Job-operator"
    CEILING = "ceiling"

    @property
    def label(self) -> str:
        return _LABELS.get(self, self.value)

    @property
    def kind(self) -> str:
        """The kind of the arm's job objects (the ceiling makes bare pods)."""
        api = _API.get(self)
        return api.kind if api else "Pod"

    @property
    def slug(self) -> str:
        """A short name for the arm's namespaces."""
        return _SLUGS[self]


#: The arms that are job controllers (all but the ceiling), in the order rounds alternate.
CONTROLLERS = (Arm.BUILTIN, Arm.OPERATOR, Arm.OPERATOR_JOB)
#: The operator's arms, each compared with the built-in.
OPERATOR_ARMS = (Arm.OPERATOR, Arm.OPERATOR_JOB)

#: The operator's name for the Jobs it runs (PJ_MANAGE_JOBS=managed-by, its default).
MANAGED_BY = "paralleljob.dev/job-controller"

_LABELS = {Arm.BUILTIN: "built-in Job", Arm.OPERATOR_JOB: "Job (operator)"}
_SLUGS = {Arm.BUILTIN: "job", Arm.OPERATOR: "par", Arm.OPERATOR_JOB: "jop", Arm.CEILING: "cei"}


@dataclass(frozen=True)
class _Api:
    api_version: str
    prefix: str
    plural: str
    kind: str


_BATCH = _Api("batch/v1", "/apis/batch/v1", "jobs", "Job")
_API = {
    Arm.BUILTIN: _BATCH,
    Arm.OPERATOR: _Api(
        "paralleljob.dev/v1alpha1", "/apis/paralleljob.dev/v1alpha1", "paralleljobs", "ParallelJob"
    ),
    Arm.OPERATOR_JOB: _BATCH,
}


def jobs_path(arm: Arm, namespace: str, name: str = "") -> str:
    """The collection (or, with ``name``, the object) URL of the arm's job kind."""
    api = _API[arm]
    return f"{api.prefix}/namespaces/{namespace}/{api.plural}" + (f"/{name}" if name else "")


def pods_path(namespace: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/pods" + (f"/{name}" if name else "")


def pod_template(duration: str = INSTANT) -> JsonDict:
    """A pod that runs on the kwok node and ends, exit code 0, ``duration`` after it
    started. The same for every arm."""
    return {
        "metadata": {
            "labels": {"app.kubernetes.io/part-of": "paralleljob-bench"},
            "annotations": {DURATION_ANNOTATION: duration},
        },
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "nodeSelector": {"type": "kwok"},
            "tolerations": [
                {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}
            ],
            "containers": [{"name": "main", "image": IMAGE, "imagePullPolicy": "IfNotPresent"}],
        },
    }


def job(
    arm: Arm, name: str, *, completions: int, parallelism: int, duration: str = INSTANT
) -> JsonDict:
    """The arm's job: ``completions`` pods, at most ``parallelism`` at once; the operator's
    Jobs name it in ``spec.managedBy``, so that the built-in Job controller skips them."""
    api = _API[arm]
    spec: JsonDict = {
        "completions": completions,
        "parallelism": parallelism,
        "template": pod_template(duration),
    }
    if arm is Arm.OPERATOR_JOB:
        spec["managedBy"] = MANAGED_BY
    return {
        "apiVersion": api.api_version,
        "kind": api.kind,
        "metadata": {"name": name},
        "spec": spec,
    }


def bare_pod(name: str, finalizer: str) -> JsonDict:
    """The ceiling client's pod: the same template, held by the client's own finalizer."""
    template = pod_template()
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {**template["metadata"], "name": name, "finalizers": [finalizer]},
        "spec": template["spec"],
    }
