"""What the bench creates: the same pod template for every arm, as Job or ParallelJob."""

from __future__ import annotations

import enum
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
    """Who drives the pods of a round."""

    BUILTIN = "Job"
    OPERATOR = "ParallelJob"
    CEILING = "ceiling"

    @property
    def label(self) -> str:
        return "built-in Job" if self is Arm.BUILTIN else self.value


_API = {
    Arm.BUILTIN: ("batch/v1", "/apis/batch/v1", "jobs"),
    Arm.OPERATOR: ("paralleljob.dev/v1alpha1", "/apis/paralleljob.dev/v1alpha1", "paralleljobs"),
}


def jobs_path(arm: Arm, namespace: str, name: str = "") -> str:
    """The collection (or, with ``name``, the object) URL of the arm's job kind."""
    _, prefix, plural = _API[arm]
    return f"{prefix}/namespaces/{namespace}/{plural}" + (f"/{name}" if name else "")


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
    """A Job or ParallelJob: ``completions`` pods, at most ``parallelism`` at once."""
    api_version, _, _ = _API[arm]
    return {
        "apiVersion": api_version,
        "kind": arm.value,
        "metadata": {"name": name},
        "spec": {
            "completions": completions,
            "parallelism": parallelism,
            "template": pod_template(duration),
        },
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
