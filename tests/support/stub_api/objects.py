"""The objects the stub starts with, shaped and sized as the API server returns them.

A running job (≈3 KB) and its pods (≈5 KB each): the job as a user creates it (a typical
template: one container with a command, environment and resources) with the
managedFields of its creator and of the operator's status writes; each pod as the
operator builds it (docs/api.md: its template's labels plus the job's name and uid
labels, the controller reference, the tracking finalizer), defaulted by the API server,
scheduled, and reported Running and ready by a kubelet, with both writers'
managedFields. The keys are the API's contract (docs/api.md, docs/jobs.md), written out
here rather than imported from the operator, so that the harness measures whatever the
operator becomes.

Each job's stored status is what the operator last wrote but for one thing, so that
every job gets exactly one status write once the operator has synced it: a ParallelJob's
generation is one ahead of its ``observedGeneration`` (its spec was edited since) and
its ``ready`` count is missing; a batch/v1 Job's ``startTime`` and ``ready`` are missing.
Both are written at once: a write that only reports progress (``ready`` alone) would wait
for the operator's progress-write budget, some 10 writes a second. A ``current`` job's
status lacks nothing (what a leader leaves): synced, it needs no write.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from .store import Json

WATCH_LABEL = "paralleljob.dev/controller-uid"
TRACKING_FINALIZER = "paralleljob.dev/tracking"
MANAGED_BY = "paralleljob.dev/job-controller"
OPERATOR_MANAGER = "paralleljob-operator"
IMAGE = "busybox:1.37.0"
CONTAINER = "worker"
#: How long the seeded jobs have been running: long enough that the printed DURATION
#: ("10d") does not change during a run (it would be refreshed on its own budget).
RUNNING_FOR = timedelta(days=10)
#: The merge keys of the lists managedFields name items of by key.
_ITEM_KEYS = {
    "containers": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumes": "name",
    "conditions": "type",
    "ownerReferences": "uid",
    "podIPs": "ip",
    "hostIPs": "ip",
    "tolerations": "key",
}
#: Lists whose items are named by value (``v:``) in managedFields.
_SET_LISTS = frozenset({"finalizers"})


@dataclass(frozen=True)
class JobType:
    """What differs between the two kinds of job on the API: its apiVersion and kind,
    and the prefix of the keys its pods are labelled with."""

    api_version: str
    kind: str
    key_prefix: str

    @property
    def batch(self) -> bool:
        return self.kind == "Job"


BATCH_JOB = JobType("batch/v1", "Job", "batch.kubernetes.io")


def parallel_job_type(api_version: str) -> JobType:
    return JobType(api_version, "ParallelJob", "paralleljob.dev")


@dataclass(frozen=True)
class JobSeed:
    namespace: str
    name: str
    uid: str
    pods: int
    type: JobType


def timestamp(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _hex(seed: str, length: int = 64) -> str:
    """Stable pseudo-random hex (container IDs, image digests) from a seed."""
    out = ""
    while len(out) < length:
        out += hashlib.sha256(f"{seed}/{len(out)}".encode()).hexdigest()
    return out[:length]


def fields_v1(value: Any, depth: int = 0) -> Json:
    """The FieldsV1 set (managedFields) of the fields of ``value``: maps by ``f:`` key,
    list items by merge key (``k:``) or value (``v:``), ``.`` for a nested map owned as
    a whole."""
    if not isinstance(value, dict):
        return {}
    out: Json = {".": {}} if depth > 1 and value else {}
    for key, item in value.items():
        if isinstance(item, list) and key in _ITEM_KEYS:
            merge_key = _ITEM_KEYS[key]
            out[f"f:{key}"] = {
                "k:" + json.dumps({merge_key: x.get(merge_key)}, separators=(",", ":")): {
                    ".": {},
                    **fields_v1(x, 1),
                }
                for x in item
                if isinstance(x, dict)
            }
        elif isinstance(item, list) and key in _SET_LISTS:
            out[f"f:{key}"] = {".": {}, **{f"v:{json.dumps(x)}": {} for x in item}}
        else:
            out[f"f:{key}"] = fields_v1(item, depth + 1)
    return out


def managed_entry(manager: str, when: str, fields: Json, subresource: str = "") -> Json:
    entry: Json = {
        "manager": manager,
        "operation": "Update",
        "apiVersion": "",
        "time": when,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }
    if subresource:
        entry["subresource"] = subresource
    return entry


# -- jobs ---------------------------------------------------------------------------------
def template(job: JobSeed) -> Json:
    """A typical pod template: one worker with a command, environment and resources."""
    labels: Json = {
        "app.kubernetes.io/name": "scale-harness",
        "app.kubernetes.io/component": "worker",
    }
    if job.type.batch:
        # The API server labels a Job's template with its selector's labels.
        labels |= {
            f"{job.type.key_prefix}/controller-uid": job.uid,
            f"{job.type.key_prefix}/job-name": job.name,
            "controller-uid": job.uid,
            "job-name": job.name,
        }
    return {
        "metadata": {"labels": labels},
        "spec": {
            "containers": [
                {
                    "name": CONTAINER,
                    "image": IMAGE,
                    "command": ["sh", "-c"],
                    "args": ["echo processing $WORK_ITEM_BATCH; sleep 3600; echo done"],
                    "env": [
                        {"name": "WORK_ITEM_BATCH", "value": "100"},
                        {"name": "QUEUE_URL", "value": "redis://redis.workqueue.svc:6379/0"},
                        {"name": "LOG_LEVEL", "value": "info"},
                    ],
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "64Mi"},
                        "limits": {"memory": "128Mi"},
                    },
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "securityContext": {},
            "schedulerName": "default-scheduler",
        },
    }


def job_spec(job: JobSeed) -> Json:
    spec: Json = {
        "parallelism": job.pods,
        "completions": job.pods,
        "backoffLimit": 6,
        "completionMode": "NonIndexed",
        "suspend": False,
        "template": template(job),
    }
    if job.type.batch:
        spec |= {
            "managedBy": MANAGED_BY,
            "podReplacementPolicy": "TerminatingOrFailed",
            "manualSelector": False,
            "selector": {"matchLabels": {f"{job.type.key_prefix}/controller-uid": job.uid}},
        }
    return spec


def _stored_status(job: JobSeed, started: str, current: bool) -> Json:
    """What the operator wrote when it last synced the running job, less what it must
    write again unless ``current`` (see the module's docstring)."""
    status: Json = {
        "active": job.pods,
        "terminating": 0,
        "succeeded": 0,
        "failed": 0,
        "uncountedTerminatedPods": {},
    }
    if current:
        status = {"startTime": started, **status, "ready": job.pods}
    if job.type.batch:
        return status  # unless current: startTime and ready missing
    return {
        "startTime": started,
        **status,
        "podFailureBackoff": {"failuresSinceLastSuccess": 0},
        "selector": f"{WATCH_LABEL}={job.uid}",
        "observedGeneration": 2 if current else 1,
        "statusText": "Running",
        "completionsText": f"0/{job.pods}",
        "durationText": "10d",
        "containersText": CONTAINER,
        "imagesText": IMAGE,
    }


def job_body(job: JobSeed, now: datetime, running: bool = True, current: bool = False) -> Json:
    """A job: running for RUNNING_FOR with its status as the module says (``current``:
    nothing to write), or (not ``running``) just created, with no status: a probe."""
    created = timestamp(now - RUNNING_FOR if running else now)
    spec = job_spec(job)
    meta: Json = {
        "name": job.name,
        "namespace": job.namespace,
        "uid": job.uid,
        "generation": 2 if running else 1,
        "creationTimestamp": created,
        "labels": {"app.kubernetes.io/name": "scale-harness", "team": "batch-platform"},
    }
    user_fields = fields_v1({"metadata": {"labels": meta["labels"]}, "spec": spec})
    meta["managedFields"] = [managed_entry("kubectl-create", created, user_fields)]
    body: Json = {"apiVersion": job.type.api_version, "kind": job.type.kind, "metadata": meta}
    body["spec"] = spec
    if running:
        status = _stored_status(job, created, current)
        meta["managedFields"].append(
            managed_entry(OPERATOR_MANAGER, created, fields_v1({"status": status}), "status")
        )
        body["status"] = status
    for entry in meta["managedFields"]:
        entry["apiVersion"] = job.type.api_version
    return body


# -- pods ---------------------------------------------------------------------------------
def _pod_labels(job: JobSeed) -> Json:
    labels: Json = dict(template(job)["metadata"]["labels"])
    labels[f"{job.type.key_prefix}/job-name"] = job.name
    labels[f"{job.type.key_prefix}/controller-uid"] = job.uid
    labels[WATCH_LABEL] = job.uid
    return labels


def pod_meta(job: JobSeed) -> Json:
    """The metadata the operator gives a pod it creates."""
    return {
        "generateName": f"{job.name}-",
        "namespace": job.namespace,
        "labels": _pod_labels(job),
        "finalizers": [TRACKING_FINALIZER],
        "ownerReferences": [
            {
                "apiVersion": job.type.api_version,
                "kind": job.type.kind,
                "name": job.name,
                "uid": job.uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }


def api_defaults(spec: Json, pod_name: str) -> Json:
    """What the API server and its admission add to a pod's spec: the service account
    and its token volume, the default tolerations, priority and preemption."""
    volume = f"kube-api-access-{_hex(pod_name, 5)}"
    out: Json = json.loads(json.dumps(spec))
    for container in out.get("containers", []):
        container.setdefault("volumeMounts", []).append(
            {
                "name": volume,
                "readOnly": True,
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
            }
        )
    out |= {
        "serviceAccountName": "default",
        "serviceAccount": "default",
        "enableServiceLinks": True,
        "priority": 0,
        "preemptionPolicy": "PreemptLowerPriority",
        "tolerations": [
            *out.get("tolerations", []),
            *(
                {
                    "key": f"node.kubernetes.io/{taint}",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
                for taint in ("not-ready", "unreachable")
            ),
        ],
        "volumes": [
            *out.get("volumes", []),
            {
                "name": volume,
                "projected": {
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {
                            "configMap": {
                                "name": "kube-root-ca.crt",
                                "items": [{"key": "ca.crt", "path": "ca.crt"}],
                            }
                        },
                        {
                            "downwardAPI": {
                                "items": [
                                    {
                                        "path": "namespace",
                                        "fieldRef": {
                                            "apiVersion": "v1",
                                            "fieldPath": "metadata.namespace",
                                        },
                                    }
                                ]
                            }
                        },
                    ],
                    "defaultMode": 420,
                },
            },
        ],
    }
    return out


def running_status(pod_name: str, spec: Json, started: str, node: int) -> Json:
    """The status kwok (the local cluster's simulated kubelet, which the scale runs of
    issue 23 used) gives a pod whose one container runs and is ready."""
    ip, host = (
        f"10.244.{node % 250}.{int(_hex(pod_name, 4), 16) % 250 + 2}",
        f"172.18.0.{node % 250 + 2}",
    )
    conditions = [
        {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": started}
        for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
    ]
    container = spec["containers"][0]
    return {
        "phase": "Running",
        "conditions": conditions,
        "hostIP": host,
        "hostIPs": [{"ip": host}],
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": started,
        "containerStatuses": [
            {
                "name": container["name"],
                "state": {"running": {"startedAt": started}},
                "lastState": {},
                "ready": True,
                "restartCount": 0,
                "image": container["image"],
                "imageID": f"busybox@sha256:{_hex(container['image'])}",
                "containerID": f"containerd://{_hex(pod_name)}",
                "started": True,
            }
        ],
        "qosClass": "Burstable",
    }


def succeeded_status(running: Json, finished: str) -> Json:
    """A running pod's status once its one container exited 0 (what kwok writes for a
    pod whose container is done): Succeeded, no longer ready."""
    conditions = [
        {**c, "status": "False", "reason": "PodCompleted", "lastTransitionTime": finished}
        if c["type"] in ("Ready", "ContainersReady")
        else c
        for c in running.get("conditions", [])
    ]
    containers = [
        {
            **c,
            "ready": False,
            "started": False,
            "state": {
                "terminated": {
                    "exitCode": 0,
                    "reason": "Completed",
                    "startedAt": c["state"]["running"]["startedAt"],
                    "finishedAt": finished,
                    "containerID": c["containerID"],
                }
            },
        }
        for c in running.get("containerStatuses", [])
    ]
    return {
        **running,
        "phase": "Succeeded",
        "conditions": conditions,
        "containerStatuses": containers,
    }


def pod_body(job: JobSeed, name: str, uid: str, now: datetime, node: int) -> Json:
    """One of a running job's pods, Running and ready, as a LIST returns it."""
    created = timestamp(now - RUNNING_FOR)
    meta = pod_meta(job) | {"name": name, "uid": uid, "creationTimestamp": created, "generation": 1}
    spec = api_defaults(template(job)["spec"], name) | {"nodeName": f"kwok-node-{node}"}
    status = running_status(name, spec, created, node)
    writer = {k: meta[k] for k in ("generateName", "labels", "finalizers", "ownerReferences")}
    creator = {"metadata": writer, "spec": template(job)["spec"]}
    meta["managedFields"] = [
        managed_entry(OPERATOR_MANAGER, created, fields_v1(creator)),
        managed_entry("kwok", created, fields_v1({"status": status}), "status"),
    ]
    for entry in meta["managedFields"]:
        entry["apiVersion"] = "v1"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def created_pod(body: Json, name: str, now: str, manager: str) -> Json:
    """A POSTed pod as the API server stores it: defaulted, Pending, unscheduled, with
    its creator's managedFields (``name`` is the one generateName got)."""
    out = json.loads(json.dumps(body))
    meta = out.setdefault("metadata", {})
    out["spec"] = api_defaults(out.get("spec") or {}, name)
    out["status"] = {"phase": "Pending", "qosClass": "Burstable"}
    writer = {
        k: meta[k] for k in ("generateName", "labels", "finalizers", "ownerReferences") if k in meta
    }
    fields = fields_v1({"metadata": writer, "spec": body.get("spec") or {}})
    meta["managedFields"] = [managed_entry(manager, now, fields) | {"apiVersion": "v1"}]
    return dict(out)
