"""The API server validates a ParallelJob as pkg/apis/batch/validation (Kubernetes v1.37)
validates a Job (issue 12): for each rule of the CRD one spec it refuses, with the
message a person reads, and specs it accepts; then updates (immutable fields, the elastic
Indexed job, the pod template's scheduling directives and resources while suspended).

No operator runs: creates are server-side dry runs, an update patches (dry run) a job
created for it. One namespace and one CRD apply for the whole module.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.wait import wait_until

from .conftest import apply_crd
from .support import BUSYBOX, assert_quiet, expected_warnings, kubectl, parse_table

pytestmark = pytest.mark.cluster

Json = dict[str, Any]

IMMUTABLE = "field is immutable"
COMPLETIONS_IMMUTABLE = "spec.completions is immutable: it cannot be changed while the job exists"
TEMPLATE_IMMUTABLE = "field is immutable: the pod template of a job cannot change"
NOT_INDEXED = "requires indexed completion mode"
ABOVE_1E5 = "when completions are above 100000 and used with backoff limit per index"
INDEX_FORMAT = "error parsing succeededIndexes: must be indexes and index intervals"
STARTED = "2026-01-01T00:00:00Z"


# ---------------------------------------------------------------- building jobs


def template(**pod_spec: Any) -> Json:
    """A one-container pod template with these pod spec fields (None removes one)."""
    spec: Json = {"restartPolicy": "Never", "containers": [{"name": "main", "image": BUSYBOX}]}
    for key, value in pod_spec.items():
        if value is None:
            spec.pop(key, None)
        else:
            spec[key] = value
    return {"spec": spec}


def job(spec: Json | None = None, *, name: str = "v", tmpl: Json | None = None) -> Json:
    return {
        "apiVersion": "paralleljob.dev/v1alpha1",
        "kind": "ParallelJob",
        "metadata": {"name": name},
        "spec": {**(spec or {}), "template": copy.deepcopy(tmpl or template())},
    }


def indexed(completions: int = 10, parallelism: int = 2, **spec: Any) -> Json:
    return {
        "completionMode": "Indexed",
        "completions": completions,
        "parallelism": parallelism,
        **spec,
    }


def exit_codes(
    action: str = "FailJob", operator: str = "In", values: list[int] | None = None, **extra: Any
) -> Json:
    """A pod failure policy rule on exit codes."""
    on_exit: Json = {"operator": operator, "values": [1] if values is None else values, **extra}
    return {"action": action, "onExitCodes": on_exit}


def conditions(action: str = "Ignore", *patterns: Json) -> Json:
    """A pod failure policy rule on pod conditions (DisruptionTarget by default)."""
    return {"action": action, "onPodConditions": list(patterns) or [{"type": "DisruptionTarget"}]}


def pfp(*rules: Json, **spec: Any) -> Json:
    return {"podFailurePolicy": {"rules": list(rules)}, **spec}


def success(*rules: Json, **spec: Any) -> Json:
    return indexed(**{"successPolicy": {"rules": list(rules)}, **spec})


def bad(
    case_id: str,
    spec: Json,
    field: str | None,
    message: str,
    *,
    name: str = "v",
    tmpl: Json | None = None,
) -> Any:
    """A job the API server must refuse with ``message`` on ``field`` (None: any)."""
    return pytest.param(job(spec, name=name, tmpl=tmpl), field, message, id=case_id)


def good(
    case_id: str,
    spec: Json,
    *,
    name: str = "v",
    tmpl: Json | None = None,
    stored: dict[str, Any] | None = None,
) -> Any:
    """A job the API server must accept; ``stored``: spec fields (dotted paths) that it
    must store with these values (the schema's defaults)."""
    return pytest.param(job(spec, name=name, tmpl=tmpl), stored or {}, id=case_id)


# ---------------------------------------------------------------- creates refused

REFUSED = [
    # ------------------------------------------------------------ completionMode
    bad(
        "completion-mode-unknown",
        {"completionMode": "Sequential"},
        "spec.completionMode",
        'Unsupported value: "Sequential": supported values: "NonIndexed", "Indexed"',
    ),
    bad(
        "indexed-without-completions",
        {"completionMode": "Indexed"},
        "spec.completions",
        "Required value: when completion mode is Indexed",
    ),
    bad(
        "indexed-parallelism-above-100000",
        indexed(completions=10, parallelism=100001),
        "spec.parallelism",
        "must be less than or equal to 100000 when completion mode is Indexed",
    ),
    bad(
        "indexed-hostname-too-long",
        indexed(completions=10000),
        None,
        "will not able to create pod with invalid DNS label",
        name="n" * 59,  # n...n-9999: 64 characters
    ),
    bad(
        "indexed-hostname-with-dots",
        indexed(completions=2),
        None,
        "will not able to create pod with invalid DNS label",
        name="a.b",
    ),
    # ------------------------------------------------------------ backoffLimitPerIndex
    bad(
        "backoff-limit-per-index-negative",
        indexed(backoffLimitPerIndex=-1),
        "spec.backoffLimitPerIndex",
        "should be greater than or equal to 0",
    ),
    bad(
        "backoff-limit-per-index-not-indexed",
        {"backoffLimitPerIndex": 1},
        "spec.backoffLimitPerIndex",
        NOT_INDEXED,
    ),
    bad(
        "max-failed-indexes-negative",
        indexed(backoffLimitPerIndex=1, maxFailedIndexes=-1),
        "spec.maxFailedIndexes",
        "should be greater than or equal to 0",
    ),
    bad(
        "max-failed-indexes-without-backoff-limit-per-index",
        indexed(maxFailedIndexes=1),
        "spec.backoffLimitPerIndex",
        "Required value: when maxFailedIndexes is specified",
    ),
    bad(
        "max-failed-indexes-not-indexed",
        {"backoffLimitPerIndex": 1, "maxFailedIndexes": 1},
        "spec.maxFailedIndexes",
        NOT_INDEXED,
    ),
    bad(
        "max-failed-indexes-above-completions",
        indexed(completions=5, backoffLimitPerIndex=1, maxFailedIndexes=6),
        "spec.maxFailedIndexes",
        "must be less than or equal to completions",
    ),
    bad(
        "max-failed-indexes-above-100000",
        indexed(completions=200000, parallelism=1, backoffLimitPerIndex=1, maxFailedIndexes=100001),
        "spec.maxFailedIndexes",
        "must be less than or equal to 100000",
    ),
    bad(
        "completions-above-100000-need-max-failed-indexes",
        indexed(completions=100001, parallelism=1, backoffLimitPerIndex=1),
        "spec.maxFailedIndexes",
        "Required value: must be specified when completions is above 100000",
    ),
    bad(
        "completions-above-100000-parallelism-above-10000",
        indexed(completions=100001, parallelism=10001, backoffLimitPerIndex=1, maxFailedIndexes=1),
        "spec.parallelism",
        f"must be less than or equal to 10000 {ABOVE_1E5}",
    ),
    bad(
        "completions-above-100000-max-failed-indexes-above-10000",
        indexed(completions=100001, parallelism=1, backoffLimitPerIndex=1, maxFailedIndexes=10001),
        "spec.maxFailedIndexes",
        f"must be less than or equal to 10000 {ABOVE_1E5}",
    ),
    # ------------------------------------------------------------ activeDeadlineSeconds
    bad(
        "active-deadline-negative",
        {"activeDeadlineSeconds": -1},
        "spec.activeDeadlineSeconds",
        "should be greater than or equal to 0",
    ),
    # ------------------------------------------------------------ podFailurePolicy
    bad(
        "pod-failure-policy-with-on-failure",
        pfp(exit_codes()),
        "spec.template.spec.restartPolicy",
        'only "Never" is supported when podFailurePolicy is specified',
        tmpl=template(restartPolicy="OnFailure"),
    ),
    bad(
        "pod-failure-policy-21-rules",
        pfp(*[exit_codes(values=[i]) for i in range(1, 22)]),
        "spec.podFailurePolicy.rules",
        "Too many: 21: must have at most 20 items",
    ),
    bad(
        "pod-failure-policy-action-missing",
        pfp({"onExitCodes": {"operator": "In", "values": [1]}}),
        "spec.podFailurePolicy.rules[0].action",
        "Required value",
    ),
    bad(
        "pod-failure-policy-action-unknown",
        pfp(exit_codes(action="Restart")),
        "spec.podFailurePolicy.rules[0].action",
        'Unsupported value: "Restart": supported values: "Count", "FailIndex", "FailJob", "Ignore"',
    ),
    bad(
        "pod-failure-policy-fail-index-without-backoff-limit-per-index",
        pfp(exit_codes(action="FailIndex"), **indexed()),
        "spec.podFailurePolicy.rules",
        "requires the backoffLimitPerIndex to be set",
    ),
    bad(
        "pod-failure-policy-rule-without-requirement",
        pfp({"action": "FailJob"}),
        "spec.podFailurePolicy.rules[0]",
        "specifying one of OnExitCodes and OnPodConditions is required",
    ),
    bad(
        "pod-failure-policy-rule-with-both-requirements",
        pfp({**exit_codes(), "onPodConditions": [{"type": "DisruptionTarget"}]}),
        "spec.podFailurePolicy.rules[0]",
        "specifying both OnExitCodes and OnPodConditions is not supported",
    ),
    bad(
        "on-exit-codes-operator-missing",
        pfp({"action": "FailJob", "onExitCodes": {"values": [1]}}),
        "spec.podFailurePolicy.rules[0].onExitCodes.operator",
        "Required value",
    ),
    bad(
        "on-exit-codes-operator-unknown",
        pfp(exit_codes(operator="Between")),
        "spec.podFailurePolicy.rules[0].onExitCodes.operator",
        'Unsupported value: "Between": supported values: "In", "NotIn"',
    ),
    bad(
        "on-exit-codes-values-empty",
        pfp(exit_codes(values=[])),
        "spec.podFailurePolicy.rules[0].onExitCodes.values",
        "at least one value is required",
    ),
    bad(
        "on-exit-codes-values-missing",
        pfp({"action": "FailJob", "onExitCodes": {"operator": "In"}}),
        "spec.podFailurePolicy.rules[0].onExitCodes.values",
        "at least one value is required",
    ),
    bad(
        "on-exit-codes-256-values",
        pfp(exit_codes(values=list(range(1, 257)))),
        "spec.podFailurePolicy.rules[0].onExitCodes.values",
        "Too many: 256: must have at most 255 items",
    ),
    bad(
        "on-exit-codes-in-0",
        pfp(exit_codes(values=[0, 1])),
        "spec.podFailurePolicy.rules[0].onExitCodes.values",
        "must not be 0 for the In operator",
    ),
    bad(
        "on-exit-codes-unordered",
        pfp(exit_codes(values=[2, 1])),
        "spec.podFailurePolicy.rules[0].onExitCodes.values",
        "must be ordered",
    ),
    bad(
        "on-exit-codes-duplicate",
        pfp(exit_codes(values=[1, 1])),
        "spec.podFailurePolicy.rules[0].onExitCodes.values[1]",
        "Duplicate value: 1",
    ),
    bad(
        "on-exit-codes-unknown-container",
        pfp(exit_codes(containerName="sidecar")),
        "spec.podFailurePolicy.rules",
        "onExitCodes.containerName must be one of the container or initContainer names",
    ),
    bad(
        "on-pod-conditions-21-patterns",
        pfp(conditions("Ignore", *[{"type": f"Condition{i}"} for i in range(21)])),
        "spec.podFailurePolicy.rules[0].onPodConditions",
        "Too many: 21: must have at most 20 items",
    ),
    bad(
        "on-pod-conditions-type-missing",
        pfp(conditions("Ignore", {"status": "True"})),
        "spec.podFailurePolicy.rules[0].onPodConditions[0].type",
        "Required value",
    ),
    bad(
        "on-pod-conditions-type-not-a-qualified-name",
        pfp(conditions("Ignore", {"type": "Disruption Target"})),
        "spec.podFailurePolicy.rules[0].onPodConditions[0].type",
        "must be a qualified name",
    ),
    bad(
        "on-pod-conditions-status-unknown",
        pfp(conditions("Ignore", {"type": "DisruptionTarget", "status": "Maybe"})),
        "spec.podFailurePolicy.rules[0].onPodConditions[0].status",
        'Unsupported value: "Maybe": supported values: "False", "True", "Unknown"',
    ),
    # ------------------------------------------------------------ podReplacementPolicy
    bad(
        "pod-replacement-policy-unknown",
        {"podReplacementPolicy": "Never"},
        "spec.podReplacementPolicy",
        'Unsupported value: "Never": supported values: "Failed", "TerminatingOrFailed"',
    ),
    bad(
        "pod-replacement-policy-terminating-with-pod-failure-policy",
        pfp(exit_codes(), podReplacementPolicy="TerminatingOrFailed"),
        "spec.podReplacementPolicy",
        'supported values: "Failed"',
    ),
    # ------------------------------------------------------------ successPolicy
    bad(
        "success-policy-not-indexed",
        {"completions": 3, "successPolicy": {"rules": [{"succeededCount": 1}]}},
        "spec.successPolicy",
        NOT_INDEXED,
    ),
    bad(
        "success-policy-without-rules",
        success(),
        "spec.successPolicy.rules",
        "Required value: at least one rules must be specified when the successPolicy is specified",
    ),
    bad(
        "success-policy-21-rules",
        success(*[{"succeededCount": 1}] * 21),
        "spec.successPolicy.rules",
        "Too many: 21: must have at most 20 items",
    ),
    bad(
        "success-policy-empty-rule",
        success({}),
        "spec.successPolicy.rules[0]",
        "Required value: at least one of succeededCount or succeededIndexes must be specified",
    ),
    bad(
        "succeeded-indexes-not-a-number",
        success({"succeededIndexes": "1,a"}),
        "spec.successPolicy.rules[0].succeededIndexes",
        INDEX_FORMAT,
    ),
    bad(
        "succeeded-indexes-three-part-interval",
        success({"succeededIndexes": "1-2-3"}),
        "spec.successPolicy.rules[0].succeededIndexes",
        INDEX_FORMAT,
    ),
    bad(
        "succeeded-indexes-decreasing",
        success({"succeededIndexes": "3,1"}),
        "spec.successPolicy.rules[0].succeededIndexes",
        "error parsing succeededIndexes: non-increasing order",
    ),
    bad(
        "succeeded-indexes-empty-interval",
        success({"succeededIndexes": "5-5"}),
        "spec.successPolicy.rules[0].succeededIndexes",
        "error parsing succeededIndexes: non-increasing order",
    ),
    bad(
        "succeeded-indexes-overlapping-intervals",
        success({"succeededIndexes": "1-4,3-6"}),
        "spec.successPolicy.rules[0].succeededIndexes",
        "error parsing succeededIndexes: non-increasing order",
    ),
    bad(
        "succeeded-indexes-beyond-completions",
        success({"succeededIndexes": "0-10"}, completions=10),
        "spec.successPolicy.rules",
        "error parsing succeededIndexes: too large index",
    ),
    bad(
        "succeeded-indexes-too-long",
        success(
            {"succeededIndexes": ",".join(str(i) for i in range(0, 2000, 2))}, completions=2000
        ),
        "spec.successPolicy.rules[0].succeededIndexes",
        "Too long: may not be more than 4096 bytes",
    ),
    bad(
        "succeeded-count-negative",
        success({"succeededCount": -1}),
        "spec.successPolicy.rules[0].succeededCount",
        "should be greater than or equal to 0",
    ),
    bad(
        "succeeded-count-above-completions",
        success({"succeededCount": 6}, completions=5),
        "spec.successPolicy.rules",
        "succeededCount must be less than or equal to completions",
    ),
    bad(
        "succeeded-count-above-succeeded-indexes",
        success({"succeededIndexes": "0-2,4", "succeededCount": 5}),
        "spec.successPolicy.rules[0].succeededCount",
        "must be less than or equal to the number of indexes in the specified succeededIndexes",
    ),
    # ------------------------------------------------------------ managedBy
    bad(
        "managed-by-without-slash",
        {"managedBy": "acme.io"},
        "spec.managedBy",
        'must be a domain-prefixed path (such as "acme.io/foo")',
    ),
    bad(
        "managed-by-empty",
        {"managedBy": ""},
        "spec.managedBy",
        'must be a domain-prefixed path (such as "acme.io/foo")',
    ),
    bad(
        "managed-by-uppercase-domain",
        {"managedBy": "Acme.io/foo"},
        "spec.managedBy",
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters",
    ),
    bad(
        "managed-by-space-in-path",
        {"managedBy": "acme.io/foo bar"},
        "spec.managedBy",
        "Invalid path (regex used for validation is",
    ),
    bad(
        "managed-by-64-characters",
        {"managedBy": "acme.io/" + "x" * 56},
        "spec.managedBy",
        "Too long: may not be more than 63 bytes",
    ),
    # ------------------------------------------------------------ podFailureBackoff
    bad(
        "pod-failure-backoff-initial-0",
        {"podFailureBackoff": {"initialSeconds": 0}},
        "spec.podFailureBackoff.initialSeconds",
        "should be greater than or equal to 1",
    ),
    bad(
        "pod-failure-backoff-max-below-initial",
        {"podFailureBackoff": {"initialSeconds": 30, "maxSeconds": 20}},
        "spec.podFailureBackoff.maxSeconds",
        "must be greater than or equal to initialSeconds",
    ),
    bad(
        "pod-failure-backoff-max-below-default-initial",
        {"podFailureBackoff": {"maxSeconds": 5}},
        "spec.podFailureBackoff.maxSeconds",
        "must be greater than or equal to initialSeconds (10 when unset)",
    ),
    # ------------------------------------------------------------ template
    bad(
        "container-without-name",
        {},
        "spec.template.spec.containers[0].name",
        "Required value",
        tmpl={"spec": {"restartPolicy": "Never", "containers": [{"image": BUSYBOX}]}},
    ),
    bad(
        "pod-spec-unknown-field",
        {},
        None,
        'unknown field "spec.template.spec.hostNetwrk"',
        tmpl=template(hostNetwrk=True),
    ),
    bad(
        "pod-spec-field-of-the-wrong-type",
        {},
        "spec.template.spec.hostNetwork",
        'Invalid value: "string": spec.template.spec.hostNetwork in body must be of type boolean',
        tmpl=template(hostNetwork="yes"),
    ),
]


# ---------------------------------------------------------------- creates accepted

#: A pod template using most PodSpec fields, as a real workload's would.
FULL_TEMPLATE: Json = {
    "metadata": {
        "labels": {"app": "train"},
        "annotations": {"example.com/owner": "ml"},
    },
    "spec": {
        "restartPolicy": "Never",
        "initContainers": [{"name": "fetch", "image": BUSYBOX, "command": ["true"]}],
        "containers": [
            {
                "name": "main",
                "image": BUSYBOX,
                "command": ["sh", "-c", "echo $JOB_COMPLETION_INDEX"],
                "env": [{"name": "A", "value": "1"}],
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
            },
            {"name": "sidecar", "image": BUSYBOX},
        ],
        "volumes": [{"name": "scratch", "emptyDir": {}}],
        "securityContext": {"runAsNonRoot": True, "runAsUser": 1000},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}
                    ]
                }
            },
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 1,
                        "podAffinityTerm": {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {"matchLabels": {"app": "train"}},
                        },
                    }
                ]
            },
        },
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}
        ],
        "schedulingGates": [{"name": "example.com/quota"}],
        "dnsConfig": {"options": [{"name": "ndots", "value": "2"}]},
        "hostAliases": [{"ip": "127.0.0.1", "hostnames": ["db"]}],
        "imagePullSecrets": [{"name": "registry"}],
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
        "activeDeadlineSeconds": 600,
        "priority": 0,
        "enableServiceLinks": False,
        "os": {"name": "linux"},
        "overhead": {"cpu": "10m"},
    },
}

#: 818 four-digit indexes and 100000: 4096 bytes, the longest succeededIndexes accepted.
INDEXES_4096 = ",".join(str(i) for i in range(1000, 2636, 2)) + ",100000"

ACCEPTED = [
    good(
        "defaults",
        {},
        stored={"completionMode": "NonIndexed", "suspend": False},
    ),
    good("active-deadline-0", {"activeDeadlineSeconds": 0}),
    good(
        "indexed-job-with-every-field",
        indexed(
            completions=10,
            parallelism=3,
            backoffLimitPerIndex=1,
            maxFailedIndexes=2,
            podReplacementPolicy="Failed",
            managedBy="paralleljob.dev/job-controller",
            activeDeadlineSeconds=3600,
            podFailureBackoff={"initialSeconds": 1, "maxSeconds": 60},
            **pfp(
                exit_codes("FailIndex", "In", [1, 2, 42], containerName="main"),
                exit_codes("FailJob", "NotIn", [0, 1, 2, 42]),
                conditions("Ignore", {"type": "DisruptionTarget"}),
                conditions("Count", {"type": "example.com/Preempted", "status": "Unknown"}),
            ),
            successPolicy={
                "rules": [
                    {"succeededIndexes": "0,2-4,7", "succeededCount": 3},
                    {"succeededIndexes": "9"},
                    {"succeededCount": 10},
                ]
            },
        ),
        tmpl=FULL_TEMPLATE,
        stored={
            "podFailurePolicy.rules.2.onPodConditions.0.status": "True",
            "podFailurePolicy.rules.3.onPodConditions.0.status": "Unknown",
        },
    ),
    good("indexed-hostname-at-63-characters", indexed(completions=10), name="n" * 61),
    good("non-indexed-name-with-dots", {"completions": 10}, name="a.b"),
    good(
        "completions-above-100000-within-the-limits",
        indexed(
            completions=100001, parallelism=10000, backoffLimitPerIndex=0, maxFailedIndexes=10000
        ),
    ),
    good("on-exit-codes-not-in-0", pfp(exit_codes(operator="NotIn", values=[0]))),
    good(
        "on-exit-codes-init-container",
        pfp(exit_codes(containerName="fetch")),
        tmpl=FULL_TEMPLATE,
    ),
    good("pod-failure-policy-without-rules", {"podFailurePolicy": {}}),
    good(
        "pod-failure-policy-with-pod-replacement-policy-failed",
        pfp(exit_codes(), podReplacementPolicy="Failed"),
    ),
    good(
        "on-pod-conditions-status-defaults-to-true",
        pfp(conditions("Ignore", {"type": "DisruptionTarget"})),
        stored={"podFailurePolicy.rules.0.onPodConditions.0.status": "True"},
    ),
    good("pod-replacement-policy-failed", {"podReplacementPolicy": "Failed"}),
    good("succeeded-indexes-empty-as-a-job", success({"succeededIndexes": ""})),
    good("succeeded-count-0", success({"succeededCount": 0})),
    good(
        "succeeded-count-equal-to-succeeded-indexes",
        success({"succeededIndexes": "0-2,4", "succeededCount": 4}),
    ),
    good(
        "succeeded-indexes-up-to-completions-1",
        success({"succeededIndexes": "0,5-9"}, completions=10),
    ),
    good(
        "succeeded-indexes-of-4096-bytes",
        success({"succeededIndexes": INDEXES_4096, "succeededCount": 819}, completions=100001),
    ),
    good("managed-by-path-characters", {"managedBy": "kueue.x-k8s.io/multikueue~v1:(a)"}),
    good("managed-by-63-characters", {"managedBy": "acme.io/" + "x" * 55}),
    good(
        "pod-failure-backoff-defaults",
        {"podFailureBackoff": {}},
        stored={"podFailureBackoff.initialSeconds": 10, "podFailureBackoff.maxSeconds": 600},
    ),
    good(
        "pod-failure-backoff-equal",
        {"podFailureBackoff": {"initialSeconds": 30, "maxSeconds": 30}},
    ),
]


# ---------------------------------------------------------------- updates


def change(
    case_id: str,
    old: Json,
    patch: Json,
    field: str | None = None,
    message: str | None = None,
    *,
    started: bool = False,
    status: Json | None = None,
    tmpl: Json | None = None,
) -> Any:
    """A merge patch of a job created from ``old`` (with its status written first: ``status``,
    and status.startTime when ``started``): refused with ``message`` on ``field``, or
    accepted (message None)."""
    written = {**({"startTime": STARTED} if started else {}), **(status or {})}
    return pytest.param(
        job(old, name=_slug(case_id), tmpl=tmpl), written, patch, field, message, id=case_id
    )


def _slug(case_id: str) -> str:
    return case_id[:63].rstrip("-")


def pod_spec_patch(**fields: Any) -> Json:
    return {"spec": {"template": {"spec": fields}}}


SUSPENDED = {"suspend": True, "completions": 3}
RESOURCES = {"requests": {"cpu": "200m", "memory": "256Mi"}}
SUSPENDED_CONDITION = {
    "type": "Suspended",
    "status": "True",
    "reason": "JobSuspended",
    "lastTransitionTime": STARTED,
}
RUNNING = {"suspend": False, "completions": 3}
NODE_AFFINITY = {
    "requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "Exists"}]}]
    }
}
POD_AFFINITY = {
    "requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "x"}}}
    ]
}

UPDATES = [
    # ------------------------------------------------------------ immutable fields
    change(
        "completion-mode-changed",
        {"completions": 3},
        {"spec": {"completionMode": "Indexed"}},
        "spec.completionMode",
        IMMUTABLE,
    ),
    change(
        "completions-of-a-non-indexed-job",
        {"completions": 3, "parallelism": 3},
        {"spec": {"completions": 4, "parallelism": 4}},
        "spec.completions",
        COMPLETIONS_IMMUTABLE,
    ),
    change(
        "backoff-limit-per-index-changed",
        indexed(backoffLimitPerIndex=1),
        {"spec": {"backoffLimitPerIndex": 2}},
        "spec.backoffLimitPerIndex",
        IMMUTABLE,
    ),
    change(
        "backoff-limit-per-index-set-later",
        indexed(),
        {"spec": {"backoffLimitPerIndex": 2}},
        "spec.backoffLimitPerIndex",
        IMMUTABLE,
    ),
    change(
        "pod-failure-policy-changed",
        pfp(exit_codes()),
        {"spec": {"podFailurePolicy": {"rules": [exit_codes(values=[2])]}}},
        "spec.podFailurePolicy",
        IMMUTABLE,
    ),
    change(
        "pod-failure-policy-set-later",
        {},
        {"spec": {"podFailurePolicy": {"rules": [exit_codes()]}}},
        "spec.podFailurePolicy",
        IMMUTABLE,
    ),
    change(
        "pod-failure-policy-removed",
        pfp(exit_codes()),
        {"spec": {"podFailurePolicy": None}},
        "spec.podFailurePolicy",
        IMMUTABLE,
    ),
    change(
        "success-policy-changed",
        success({"succeededCount": 1}),
        {"spec": {"successPolicy": {"rules": [{"succeededCount": 2}]}}},
        "spec.successPolicy",
        IMMUTABLE,
    ),
    change(
        "managed-by-set-later",
        {},
        {"spec": {"managedBy": "example.com/other"}},
        "spec.managedBy",
        IMMUTABLE,
    ),
    change(
        "managed-by-changed",
        {"managedBy": "example.com/one"},
        {"spec": {"managedBy": "example.com/two"}},
        "spec.managedBy",
        IMMUTABLE,
    ),
    # ------------------------------------------------------------ mutable fields
    change(
        "max-failed-indexes-changed",
        indexed(backoffLimitPerIndex=1, maxFailedIndexes=1),
        {"spec": {"maxFailedIndexes": 3}},
    ),
    change(
        "pod-replacement-policy-changed",
        {"podReplacementPolicy": "TerminatingOrFailed"},
        {"spec": {"podReplacementPolicy": "Failed"}},
    ),
    change(
        "defaults-written-by-the-operator",
        pfp(exit_codes()),
        {
            "spec": {
                "parallelism": 1,
                "completions": 1,
                "backoffLimit": 6,
                "podReplacementPolicy": "Failed",
            }
        },
    ),
    change(
        "pod-failure-backoff-changed",
        {"podFailureBackoff": {"initialSeconds": 5}},
        {"spec": {"podFailureBackoff": {"initialSeconds": 1, "maxSeconds": 10}}},
    ),
    change(
        "indexed-parallelism-raised-above-100000",
        indexed(),
        {"spec": {"parallelism": 100001}},
        "spec.parallelism",
        "must be less than or equal to 100000 when completion mode is Indexed",
    ),
    # ------------------------------------------------------------ elastic Indexed jobs
    change(
        "elastic-indexed-scaled-up",
        indexed(completions=4, parallelism=4),
        {"spec": {"completions": 6, "parallelism": 6}},
    ),
    change(
        "elastic-indexed-scaled-down",
        indexed(completions=4, parallelism=4),
        {"spec": {"completions": 2, "parallelism": 2}},
    ),
    change(
        "elastic-indexed-completions-alone",
        indexed(completions=4, parallelism=4),
        {"spec": {"completions": 6}},
        "spec.completions",
        "can only be modified in tandem with spec.parallelism",
    ),
    change(
        "elastic-indexed-completions-not-equal-to-parallelism",
        indexed(completions=4, parallelism=4),
        {"spec": {"completions": 6, "parallelism": 5}},
        "spec.completions",
        "can only be modified in tandem with spec.parallelism",
    ),
    change(
        "elastic-indexed-parallelism-alone",
        indexed(completions=4, parallelism=4),
        {"spec": {"parallelism": 2}},
    ),
    # ------------------------------------------------------------ the pod template
    change(
        "running-job-parallelism-changed",
        RUNNING,
        {"spec": {"parallelism": 2}},
    ),
    change(
        "running-job-image-changed",
        RUNNING,
        pod_spec_patch(containers=[{"name": "main", "image": "busybox:1.36.0"}]),
        "spec.template",
        TEMPLATE_IMMUTABLE,
    ),
    change(
        "running-job-node-selector-changed",
        RUNNING,
        pod_spec_patch(nodeSelector={"pool": "b"}),
        "spec.template",
        TEMPLATE_IMMUTABLE,
    ),
    change(
        "running-job-command-replaced-by-args",
        RUNNING,
        pod_spec_patch(containers=[{"name": "main", "image": BUSYBOX, "args": ["true"]}]),
        "spec.template",
        TEMPLATE_IMMUTABLE,
        tmpl=template(containers=[{"name": "main", "image": BUSYBOX, "command": ["true"]}]),
    ),
    change(
        "running-job-labels-changed",
        RUNNING,
        {"spec": {"template": {"metadata": {"labels": {"app": "x"}}}}},
        "spec.template",
        TEMPLATE_IMMUTABLE,
    ),
    change(
        "suspended-job-scheduling-directives-changed",
        SUSPENDED,
        {
            "spec": {
                "template": {
                    "metadata": {"labels": {"app": "x"}, "annotations": {"note": "moved"}},
                    "spec": {
                        "nodeSelector": {"pool": "b"},
                        "tolerations": [{"key": "gpu", "operator": "Exists"}],
                        "schedulingGates": [{"name": "example.com/quota"}],
                        "affinity": {"nodeAffinity": NODE_AFFINITY},
                    },
                }
            }
        },
    ),
    change(
        "suspended-job-resumed-with-a-new-node-selector",
        SUSPENDED,
        {"spec": {"suspend": False, "template": {"spec": {"nodeSelector": {"pool": "b"}}}}},
    ),
    change(
        "suspended-job-node-affinity-removed",
        SUSPENDED,
        pod_spec_patch(affinity=None),
        tmpl=template(affinity={"nodeAffinity": NODE_AFFINITY}),
    ),
    change(
        "suspended-job-affinity-with-pod-affinity-removed",
        SUSPENDED,
        pod_spec_patch(affinity=None),
        "spec.template",
        TEMPLATE_IMMUTABLE,
        tmpl=template(affinity={"nodeAffinity": NODE_AFFINITY, "podAffinity": POD_AFFINITY}),
    ),
    change(
        "suspended-job-pod-affinity-added",
        SUSPENDED,
        pod_spec_patch(affinity={"podAffinity": POD_AFFINITY}),
        "spec.template",
        TEMPLATE_IMMUTABLE,
    ),
    change(
        "suspended-job-image-changed",
        SUSPENDED,
        pod_spec_patch(containers=[{"name": "main", "image": "busybox:1.36.0"}]),
        "spec.template",
        TEMPLATE_IMMUTABLE,
    ),
    change(
        "suspended-job-host-network-set",
        SUSPENDED,
        pod_spec_patch(hostNetwork=True),
        "spec.template",
        TEMPLATE_IMMUTABLE,
    ),
    change(
        "suspended-job-restart-policy-changed",
        SUSPENDED,
        pod_spec_patch(restartPolicy="OnFailure"),
        "spec.template",
        TEMPLATE_IMMUTABLE,
    ),
    change(
        "suspended-job-template-namespace-set",
        SUSPENDED,
        {"spec": {"template": {"metadata": {"namespace": "other"}}}},
        "spec.template",
        TEMPLATE_IMMUTABLE,
    ),
    change(
        "suspended-job-that-started-node-selector-changed",
        SUSPENDED,
        pod_spec_patch(nodeSelector={"pool": "b"}),
        "spec.template",
        TEMPLATE_IMMUTABLE,
        started=True,
    ),
    # Kubernetes 1.36: resources too, and after a start once the job is Suspended.
    change(
        "suspended-job-resources-changed",
        SUSPENDED,
        pod_spec_patch(containers=[{"name": "main", "image": BUSYBOX, "resources": RESOURCES}]),
    ),
    change(
        "suspended-job-init-container-resources-changed",
        SUSPENDED,
        pod_spec_patch(initContainers=[{"name": "init", "image": BUSYBOX, "resources": RESOURCES}]),
        tmpl=template(initContainers=[{"name": "init", "image": BUSYBOX}]),
    ),
    change(
        "suspended-job-resources-and-command-changed",
        SUSPENDED,
        pod_spec_patch(
            containers=[{"name": "main", "image": BUSYBOX, "resources": RESOURCES, "args": ["x"]}]
        ),
        "spec.template",
        TEMPLATE_IMMUTABLE,
    ),
    change(
        "suspended-job-container-renamed",
        SUSPENDED,
        pod_spec_patch(containers=[{"name": "other", "image": BUSYBOX}]),
        "spec.template",
        TEMPLATE_IMMUTABLE,
    ),
    change(
        "suspended-job-container-added",
        SUSPENDED,
        pod_spec_patch(
            containers=[{"name": "main", "image": BUSYBOX}, {"name": "b", "image": BUSYBOX}]
        ),
        "spec.template",
        TEMPLATE_IMMUTABLE,
    ),
    change(
        "started-then-suspended-job-resources-and-node-selector-changed",
        SUSPENDED,
        pod_spec_patch(
            nodeSelector={"pool": "b"},
            containers=[{"name": "main", "image": BUSYBOX, "resources": RESOURCES}],
        ),
        status={"conditions": [SUSPENDED_CONDITION], "active": 0},
        started=True,
    ),
    change(
        "suspended-job-with-active-pods-resources-changed",
        SUSPENDED,
        pod_spec_patch(containers=[{"name": "main", "image": BUSYBOX, "resources": RESOURCES}]),
        "spec.template",
        TEMPLATE_IMMUTABLE,
        status={"conditions": [SUSPENDED_CONDITION], "active": 1},
        started=True,
    ),
    change(
        "running-job-resources-changed",
        RUNNING,
        pod_spec_patch(containers=[{"name": "main", "image": BUSYBOX, "resources": RESOURCES}]),
        "spec.template",
        TEMPLATE_IMMUTABLE,
    ),
]


# ---------------------------------------------------------------- the tests


@pytest.fixture(scope="module")
def ns(kubeconfig: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """One namespace for the module, with the CRD applied once as the ``crd`` fixture
    applies it (that fixture is per test: 100 applies would triple the module's time).

    Its Warning Events are judged once, at the module's end, as conftest.py's
    ``namespace`` judges a test's (one listing, not one per test: no operator runs, so
    nothing here should post any); then only if no test failed while it was in use (a
    failure has said what went wrong)."""
    apply_crd()
    name = f"pj-validation-{uuid.uuid4().hex[:8]}"
    kubectl("create", "namespace", name)
    kubectl("label", "namespace", name, "paralleljob.dev/test=true")
    failed_before = request.session.testsfailed
    try:
        yield name
        if request.session.testsfailed == failed_before:
            assert_quiet(name, expected_warnings(request.node))
    finally:
        kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)


def _create(ns: str, body: Json, *, dry_run: bool) -> subprocess.CompletedProcess[str]:
    args = ["-n", ns, "create", "-o", "json", "-f", "-"]
    if dry_run:
        args.append("--dry-run=server")
    return kubectl(*args, input=json.dumps(body), check=False)


def assert_refused(
    result: subprocess.CompletedProcess[str], field: str | None, message: str
) -> None:
    """Refused, with ``message`` in the error on ``field`` (kubectl prints one error per
    line, `field: Type: value: detail`)."""
    assert result.returncode != 0, f"accepted: {result.stdout[:2000]}"
    if field is None:
        assert message in result.stderr, result.stderr
    else:
        pattern = re.escape(field) + r": [^\n]*" + re.escape(message)
        assert re.search(pattern, result.stderr), (
            f"no {field!r}: ...{message!r} in:\n{result.stderr}"
        )


def _get(doc: Any, dotted: str) -> Any:
    for key in dotted.split("."):
        doc = doc[int(key)] if isinstance(doc, list) else doc[key]
    return doc


@pytest.mark.parametrize(("body", "field", "message"), REFUSED)
def test_api_server_refuses_what_a_job_refuses(
    ns: str, body: Json, field: str | None, message: str
) -> None:
    assert_refused(_create(ns, body, dry_run=True), field, message)


@pytest.mark.parametrize(("body", "stored"), ACCEPTED)
def test_api_server_accepts_what_a_job_accepts(ns: str, body: Json, stored: dict[str, Any]) -> None:
    result = _create(ns, body, dry_run=True)
    assert result.returncode == 0, result.stderr
    spec = json.loads(result.stdout)["spec"]
    for path, value in stored.items():
        assert _get(spec, path) == value, (path, spec)


@pytest.mark.parametrize(("body", "status", "patch", "field", "message"), UPDATES)
def test_api_server_validates_updates_as_a_job(
    ns: str,
    body: Json,
    status: Json,
    patch: Json,
    field: str | None,
    message: str | None,
) -> None:
    name = body["metadata"]["name"]
    created = _create(ns, body, dry_run=False)
    assert created.returncode == 0, created.stderr
    if status:
        written = json.dumps({"status": status})
        kubectl(
            "-n", ns, "patch", "pj", name, "--subresource=status", "--type=merge", "-p", written
        )
    result = kubectl(
        "-n", ns, "patch", "pj", name, "--type=merge", "--dry-run=server",
        "-p", json.dumps(patch), check=False,
    )  # fmt: skip
    if message is None:
        assert result.returncode == 0, result.stderr
    else:
        assert_refused(result, field, message)


def test_wide_output_lists_every_container_and_image(ns: str) -> None:
    """CONTAINERS and IMAGES read the strings the operator writes in status (a printer
    column's `[*]` would print the first container only)."""
    name = "wide"
    assert _create(ns, job({"suspend": True}, name=name), dry_run=False).returncode == 0
    status = {
        "statusText": "Suspended",
        "completionsText": "0/1",
        "durationText": "0s",
        "containersText": "main,sidecar",
        "imagesText": f"{BUSYBOX},{BUSYBOX}",
    }
    kubectl("-n", ns, "patch", "pj", name, "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": status}))  # fmt: skip
    [row] = parse_table(kubectl("-n", ns, "get", "pj", name, "-o", "wide").stdout)
    assert (row["CONTAINERS"], row["IMAGES"]) == ("main,sidecar", f"{BUSYBOX},{BUSYBOX}"), row


def test_explain_describes_the_extension(ns: str) -> None:
    def explained() -> str | None:
        result = kubectl("explain", "paralleljobs.spec.podFailureBackoff", check=False)
        text = " ".join(result.stdout.split())
        return text if "kubernetes#94012" in text else None

    # The API server publishes a new schema's OpenAPI a few seconds after it applies it.
    text = wait_until(explained, timeout=60, what="the podFailureBackoff description")
    assert "A ParallelJob extension" in text, text
