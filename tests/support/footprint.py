"""A ParallelJob and its pods as the API server returns them, and what the operator keeps
of them in memory (issue 23, items 3 and 4): the bodies the footprint measurement
(``python -m bench.footprint``) and the unit tests of the job record and ``PodInfo``
parse. No cluster.

* ``job_body``: the bench's job (3.0 KB of JSON: managedFields of the client, the
  operator's spec defaults and its status writes), or a typical template applied with
  ``kubectl apply`` (about 34 KB: ``kubectl.kubernetes.io/last-applied-configuration``
  and its managedFields); ``pod_body``: one of its 5.1 KB running pods.
* ``record_bytes``: bytes a ``JobRuntime`` keeps of a job's body (its record and the
  parse, ``rt.job``: the runtime's bytes less those of a job with nothing but its
  identity) once the watch event that brought it is gone, measured with tracemalloc; and
  of the whole runtime. ``retained(pod_info, ...)``: bytes per ``PodInfo``.
"""

from __future__ import annotations

import copy
import gc
import json
import tracemalloc
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.workloads import pod_template
from paralleljob.core.job.kind import PARALLELJOB
from paralleljob.core.job.model import parse_pod
from paralleljob.jobs.job_runtime import JobRuntime
from paralleljob.timeutil import format_time
from tests.support.stub_api.objects import api_defaults

JsonDict = dict[str, Any]

T0 = datetime(2026, 12, 1, 10, 0, 0, tzinfo=UTC)
NAMESPACE = "bench-s8"
IMAGE = "registry.k8s.io/e2e-test-images/busybox:1.37.0-2"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def fake_uid(kind: int, i: int) -> str:
    return f"{kind:08x}-{i >> 16:04x}-4{i & 0xFFF:03x}-a{i % 999:03d}-{i * 7919:012x}"


def _fields(value: Any) -> JsonDict:
    """The FieldsV1 of ``value`` as a manager owning all of it sets it: a key per field
    (``f:name``), lists of objects keyed by name (``k:{"name":...}``), ``.`` for an
    object owned as a whole."""
    if isinstance(value, dict):
        out: JsonDict = {".": {}}
        for key, item in value.items():
            out[f"f:{key}"] = _fields(item)
        return out
    if isinstance(value, list) and value and all(isinstance(x, dict) for x in value):
        out = {".": {}}
        for item in value:
            key = {"name": item["name"]} if "name" in item else {"key": item.get("key", "")}
            out[f"k:{json.dumps(key, separators=(',', ':'))}"] = _fields(item)
        return out
    return {}


def _managed(manager: str, fields: JsonDict, subresource: str | None = None) -> JsonDict:
    entry: JsonDict = {
        "apiVersion": PARALLELJOB.api_version,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
        "manager": manager,
        "operation": "Update",
        "time": format_time(T0),
    }
    if subresource:
        entry["subresource"] = subresource
    return entry


def _bench_template() -> JsonDict:
    """The bench's pod template (bench/workloads.py, a long-running kwok pod), stored as
    sent: a custom resource's template gets none of a pod's defaults; with the kwok stage
    and image of the runs these figures were first measured with."""
    template = pod_template()
    template["metadata"]["annotations"] = {"pod-complete.stage.kwok.x-k8s.io/delay": "3600s"}
    template["spec"]["containers"][0]["image"] = IMAGE
    return template


def _container(name: str, env: int, i: int) -> JsonDict:
    return {
        "name": name,
        "image": f"registry.example.com/data-platform/{name}:v2.41.{i % 7}",
        "imagePullPolicy": "IfNotPresent",
        "command": ["/usr/local/bin/entrypoint", "--config", "/etc/worker/config.yaml"],
        "args": ["--queue", "ingest-events", "--batch-size", "500", "--log-format", "json"],
        "env": [
            {"name": f"WORKER_SETTING_{k:02d}", "value": f"value-{k:02d}-for-{name}-worker"}
            for k in range(env)
        ]
        + [
            {
                "name": "POD_NAME",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
            },
            {
                "name": "DATABASE_PASSWORD",
                "valueFrom": {"secretKeyRef": {"name": "warehouse-credentials", "key": "pw"}},
            },
        ],
        "envFrom": [{"configMapRef": {"name": "worker-defaults"}}],
        "ports": [{"name": "metrics", "containerPort": 9090, "protocol": "TCP"}],
        "resources": {
            "requests": {"cpu": "500m", "memory": "512Mi", "ephemeral-storage": "1Gi"},
            "limits": {"cpu": "2", "memory": "2Gi", "ephemeral-storage": "4Gi"},
        },
        "volumeMounts": [
            {"name": "config", "mountPath": "/etc/worker", "readOnly": True},
            {"name": "scratch", "mountPath": "/scratch"},
            {"name": "credentials", "mountPath": "/var/run/secrets/warehouse", "readOnly": True},
        ],
        "livenessProbe": {
            "httpGet": {"path": "/healthz", "port": "metrics", "scheme": "HTTP"},
            "initialDelaySeconds": 10,
            "periodSeconds": 20,
            "timeoutSeconds": 2,
            "successThreshold": 1,
            "failureThreshold": 3,
        },
        "readinessProbe": {
            "httpGet": {"path": "/ready", "port": "metrics", "scheme": "HTTP"},
            "periodSeconds": 5,
            "timeoutSeconds": 1,
            "successThreshold": 1,
            "failureThreshold": 3,
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }


def _typical_template(i: int) -> JsonDict:
    """A production-looking template: a worker and a sidecar with their settings, an
    init container, volumes, affinity and tolerations."""
    return {
        "metadata": {
            "labels": {
                "app.kubernetes.io/name": "ingest-worker",
                "app.kubernetes.io/part-of": "data-platform",
                "app.kubernetes.io/version": "2.41.0",
                "team": "data-platform",
            },
            "annotations": {
                "prometheus.io/scrape": "true",
                "prometheus.io/port": "9090",
                "cluster-autoscaler.kubernetes.io/safe-to-evict": "false",
            },
        },
        "spec": {
            "restartPolicy": "Never",
            "serviceAccountName": "ingest-worker",
            "terminationGracePeriodSeconds": 60,
            "priorityClassName": "batch-high",
            "initContainers": [_container("migrate", 6, i)],
            "containers": [_container("worker", 48, i), _container("uploader", 12, i)],
            "volumes": [
                {"name": "config", "configMap": {"name": "ingest-worker", "defaultMode": 420}},
                {"name": "scratch", "emptyDir": {"sizeLimit": "4Gi"}},
                {
                    "name": "credentials",
                    "secret": {"secretName": "warehouse-credentials", "defaultMode": 256},
                },
            ],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "node.kubernetes.io/instance-type",
                                        "operator": "In",
                                        "values": ["m6i.2xlarge", "m6i.4xlarge"],
                                    }
                                ]
                            }
                        ]
                    }
                },
            },
            "tolerations": [
                {"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}
            ],
            "dnsPolicy": "ClusterFirst",
            "schedulerName": "default-scheduler",
            "securityContext": {"fsGroup": 2000, "runAsUser": 1000},
        },
    }


def job_body(i: int, *, typical: bool = False) -> JsonDict:
    """Job ``i`` as the API server returns it in a watch event: running its 5 pods, with
    managedFields (its creator, the operator's spec defaults and status writes), and for
    the typical template the last-applied annotation ``kubectl apply`` writes."""
    name = f"ingest-{i:05d}" if typical else f"s8-{i:05d}"
    uid = fake_uid(1, i)
    spec: JsonDict = {
        "completions": 5,
        "parallelism": 5,
        "backoffLimit": 6,
        "template": _typical_template(i) if typical else _bench_template(),
    }
    labels = {"app.kubernetes.io/part-of": "data-platform" if typical else "paralleljob-bench"}
    status: JsonDict = {
        "active": 5,
        "ready": 5,
        "terminating": 0,
        "succeeded": 0,
        "failed": 0,
        "startTime": format_time(T0),
        "uncountedTerminatedPods": {"succeeded": [], "failed": []},
        "podFailureBackoff": {"failuresSinceLastSuccess": 0},
        "selector": f"paralleljob.dev/controller-uid={uid}",
        "observedGeneration": 2,
        "statusText": "Running",
        "completionsText": "0/5",
        "durationText": "12m",
        "containersText": "worker,uploader" if typical else "main",
        "imagesText": ",".join(c["image"] for c in spec["template"]["spec"]["containers"]),
    }
    meta: JsonDict = {
        "creationTimestamp": format_time(T0),
        "generation": 2,
        "labels": labels,
        "name": name,
        "namespace": NAMESPACE,
        "resourceVersion": str(1_000_000 + i),
        "uid": uid,
    }
    creator = "kubectl-client-side-apply" if typical else "python-requests"
    created = {"f:metadata": {"f:labels": _fields(labels)}, "f:spec": _fields(spec)}
    if typical:
        applied = {
            "apiVersion": PARALLELJOB.api_version,
            "kind": PARALLELJOB.kind,
            "metadata": {"labels": labels, "name": name, "namespace": NAMESPACE},
            "spec": spec,
        }
        meta["annotations"] = {LAST_APPLIED: json.dumps(applied, separators=(",", ":")) + "\n"}
        created["f:metadata"]["f:annotations"] = {".": {}, f"f:{LAST_APPLIED}": {}}
    defaults: JsonDict = {"f:spec": {"f:completionMode": {}}}
    spec["completionMode"] = "NonIndexed"
    meta["managedFields"] = [
        _managed(creator, created),
        _managed("paralleljob-operator", defaults),
        _managed("paralleljob-operator", {"f:status": _fields(status)}, "status"),
    ]
    return {
        "apiVersion": PARALLELJOB.api_version,
        "kind": PARALLELJOB.kind,
        "metadata": meta,
        "spec": spec,
        "status": status,
    }


_POD_CONDITIONS = (
    "PodReadyToStartContainers",
    "Initialized",
    "Ready",
    "ContainersReady",
    "PodScheduled",
)


def pod_body(job: JsonDict, k: int) -> JsonDict:
    """Pod ``k`` of ``job``, running and ready on the kwok node, as the API server returns
    it (the operator's creation and kubelet's status in managedFields)."""
    jmeta = job["metadata"]
    uid, name = jmeta["uid"], f"{jmeta['name']}-{k:05x}"
    template = copy.deepcopy(job["spec"]["template"])
    labels = {
        **template["metadata"].get("labels", {}),
        PARALLELJOB.job_name_label: jmeta["name"],
        PARALLELJOB.controller_uid_label: uid,
    }
    meta: JsonDict = {
        "annotations": template["metadata"].get("annotations", {}),
        "creationTimestamp": format_time(T0),
        "finalizers": [PARALLELJOB.finalizer],
        "generateName": f"{jmeta['name']}-",
        "generation": 1,
        "labels": labels,
        "name": name,
        "namespace": jmeta["namespace"],
        "ownerReferences": [PARALLELJOB.owner_reference(jmeta["name"], uid)],
        "resourceVersion": str(2_000_000 + k),
        "uid": fake_uid(2, int(jmeta["resourceVersion"]) * 8 + k),
    }
    spec = template["spec"]
    sent = ("annotations", "finalizers", "generateName", "labels", "ownerReferences")
    created = {"f:metadata": _fields({k: meta[k] for k in sent}), "f:spec": _fields(spec)}
    # What the pod API's defaults and admission add (the creator owns none of it): the
    # service account and its token volume, the default tolerations; and the node.
    spec = api_defaults(spec, name)
    for container in spec["containers"]:
        container.setdefault("resources", {})
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    spec["nodeName"] = "kwok-node-0"
    started = format_time(T0 + timedelta(seconds=2))
    conditions = [
        {
            "type": t,
            "status": "True",
            "observedGeneration": 1,
            "lastProbeTime": None,
            "lastTransitionTime": format_time(T0) if t == "PodScheduled" else started,
        }
        for t in _POD_CONDITIONS
    ]
    status: JsonDict = {
        "observedGeneration": 1,
        "phase": "Running",
        "conditions": conditions,
        "hostIP": "10.0.0.10",
        "hostIPs": [{"ip": "10.0.0.10"}],
        "podIP": f"10.244.{k % 250}.{(k * 7) % 250}",
        "podIPs": [{"ip": f"10.244.{k % 250}.{(k * 7) % 250}"}],
        "qosClass": "BestEffort",
        "startTime": started,
        "containerStatuses": [
            {
                "name": c["name"],
                "image": c["image"],
                "imageID": f"{c['image']}@sha256:{'ab' * 32}",
                "containerID": f"containerd://{'cd' * 32}",
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": started}},
                "lastState": {},
            }
            for c in spec["containers"]
        ],
    }
    meta["managedFields"] = [
        {
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": created,
            "manager": "paralleljob-operator",
            "operation": "Update",
            "time": format_time(T0),
        },
        {
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:status": _fields(status)},
            "manager": "kwok",
            "operation": "Update",
            "subresource": "status",
            "time": started,
        },
    ]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def wire(body: JsonDict) -> str:
    """The body's JSON as it comes over the wire (compact)."""
    return json.dumps(body, separators=(",", ":"))


def retained(build: Callable[[str], object], payloads: Sequence[str]) -> float:
    """Bytes per payload that what ``build`` returns for it keeps allocated, once the
    parsed JSON it was given (and everything else it made) is garbage: payloads are
    parsed inside ``build``, as each watch event is."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [build(p) for p in payloads]
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(kept) == len(payloads)
    return (after - before) / len(payloads)


def job_runtime(payload: str) -> object:
    """A job's runtime from a watch event's payload, parsed as a sync reads it."""
    rt = JobRuntime(json.loads(payload))
    _ = rt.job
    return rt


def bare_job(i: int) -> JsonDict:
    """A job with nothing but its identity: what its runtime keeps is the runtime's own
    (its loop, pod and status state), no record of a body."""
    body = job_body(i)
    return {"metadata": {k: body["metadata"][k] for k in ("name", "namespace", "uid")}}


def record_bytes(payloads: Sequence[str]) -> tuple[float, float]:
    """Bytes per job that a runtime keeps of the body in ``payloads`` (its record and
    parse: the runtime's bytes less a bare job's), and the whole runtime's."""
    runtime = retained(job_runtime, payloads)
    bare = retained(job_runtime, [wire(bare_job(i)) for i in range(len(payloads))])
    return runtime - bare, runtime


def pod_info(payload: str) -> object:
    return parse_pod(json.loads(payload), PARALLELJOB)
