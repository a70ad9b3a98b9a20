"""The pod failure policy: which rule a failed pod matches, and what that means for the job.

Ports ``pkg/controller/job/pod_failure_policy.go`` (Kubernetes v1.37.2). What differs:

* The policy and the pod are small frozen dataclasses parsed from their JSON
  (``parse_pod_failure_policy``, ``pod_failure_facts``), not the API types; the pod is
  reduced to what the matcher reads (``PodFailureFacts``).
* ``FailIndex`` rules always apply, as upstream's since v1.37 removed the
  ``JobBackoffLimitPerIndex`` gate.
* Actions and operators are plain strings, as in the JSON: an action or operator this
  module does not know makes its rule match nothing, as upstream's ``switch`` does.

At the end, what ``job_controller.go`` decides with the matcher, over the operator's
:class:`~paralleljob.core.job.model.PodInfo` (which keeps a pod's ``PodFailureFacts`` in its
``failure`` field): ``getFailJobMessage`` (the FailJob verdict), ``nonIgnoredFailedPodsCount``
and the ``countFailed`` of the pod loop of ``trackJobStatusAndRemoveFinalizers``. A job
with a policy replaces only failed pods (``onlyReplaceFailedPods``), so for it
``isPodFailed`` is the phase Failed, which is what these functions check.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, Protocol

from ...json_types import as_dict, as_list

# batch/v1 PodFailurePolicyAction.
ACTION_FAIL_JOB: Final = "FailJob"
ACTION_FAIL_INDEX: Final = "FailIndex"
ACTION_IGNORE: Final = "Ignore"
ACTION_COUNT: Final = "Count"

# batch/v1 PodFailurePolicyOnExitCodesOperator.
OPERATOR_IN: Final = "In"
OPERATOR_NOT_IN: Final = "NotIn"

#: batch/v1 JobReasonPodFailurePolicy: the reason of the FailureTarget (then Failed)
#: condition a FailJob rule leads to (``syncJob`` via ``getFailJobMessage``).
REASON_POD_FAILURE_POLICY: Final = "PodFailurePolicy"


# ------------------------------------------------------------------------------------ the policy
@dataclass(frozen=True)
class OnExitCodes:
    """batch/v1 PodFailurePolicyOnExitCodesRequirement."""

    operator: str
    values: tuple[int, ...] = ()
    #: None: the rule looks at every container, init containers included.
    container_name: str | None = None


@dataclass(frozen=True)
class OnPodConditionsPattern:
    """batch/v1 PodFailurePolicyOnPodConditionsPattern."""

    type: str
    status: str = "True"


@dataclass(frozen=True)
class PodFailurePolicyRule:
    """batch/v1 PodFailurePolicyRule (the API allows onExitCodes or onPodConditions)."""

    action: str
    on_exit_codes: OnExitCodes | None = None
    on_pod_conditions: tuple[OnPodConditionsPattern, ...] = ()


@dataclass(frozen=True)
class PodFailurePolicy:
    """batch/v1 PodFailurePolicy."""

    rules: tuple[PodFailurePolicyRule, ...] = ()


# --------------------------------------------------------------------------------- the pod facts
@dataclass(frozen=True)
class ContainerStatus:
    """The part of a v1.ContainerStatus the matcher reads."""

    name: str
    #: ``state.terminated.exitCode``; None while the container has not terminated.
    exit_code: int | None = None


@dataclass(frozen=True)
class PodCondition:
    """The part of a v1.PodCondition the matcher reads."""

    type: str
    status: str


@dataclass(frozen=True)
class PodFailureFacts:
    """What ``matchPodFailurePolicy`` reads of a failed pod."""

    namespace: str
    name: str
    init_container_statuses: tuple[ContainerStatus, ...] = ()
    container_statuses: tuple[ContainerStatus, ...] = ()
    conditions: tuple[PodCondition, ...] = ()


class PodFailurePolicyMatch(NamedTuple):
    """What ``matchPodFailurePolicy`` returns."""

    #: The job failure message, when the pod matched a FailJob rule.
    message: str | None
    #: Whether the failure counts towards backoffLimit (False only for an Ignore rule).
    count_failed: bool
    #: The matched rule's action, None when no rule matched.
    action: str | None


class FailedPod(Protocol):
    """What the job-level decisions read of a pod (a ``model.PodInfo``)."""

    @property
    def name(self) -> str: ...

    @property
    def namespace(self) -> str: ...

    @property
    def phase(self) -> str: ...

    @property
    def failure(self) -> PodFailureFacts | None: ...


#: v1.PodFailed.
_POD_FAILED: Final = "Failed"


# ------------------------------------------------------------------------------------- parsing


def _as_str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _is_int(value: object) -> bool:
    # bool is an int in Python, never in JSON.
    return isinstance(value, int) and not isinstance(value, bool)


def _parse_on_exit_codes(raw: object) -> OnExitCodes | None:
    if raw is None:
        return None
    req = as_dict(raw)
    name = req.get("containerName")
    return OnExitCodes(
        operator=_as_str(req.get("operator")),
        values=tuple(v for v in as_list(req.get("values")) if _is_int(v)),
        container_name=name if isinstance(name, str) else None,
    )


def _parse_pattern(raw: object) -> OnPodConditionsPattern:
    pattern = as_dict(raw)
    # SetDefaults_PodFailurePolicyOnPodConditionsPattern: an empty status means True.
    return OnPodConditionsPattern(
        type=_as_str(pattern.get("type")), status=_as_str(pattern.get("status")) or "True"
    )


def _parse_rule(raw: object) -> PodFailurePolicyRule:
    # A malformed rule still takes its place, so later rules keep their index (the
    # index is in the job failure message); with no known action it matches nothing.
    rule = as_dict(raw)
    return PodFailurePolicyRule(
        action=_as_str(rule.get("action")),
        on_exit_codes=_parse_on_exit_codes(rule.get("onExitCodes")),
        on_pod_conditions=tuple(_parse_pattern(p) for p in as_list(rule.get("onPodConditions"))),
    )


def parse_pod_failure_policy(spec: Mapping[str, Any]) -> PodFailurePolicy | None:
    """``spec.podFailurePolicy`` of a job's spec (batch/v1 JSON), None when unset.

    None and a policy without rules differ: upstream also reads whether a policy is set
    (``onlyReplaceFailedPods``, ``trackTerminatingPods``, the PodReplacementPolicy default).
    """
    raw = spec.get("podFailurePolicy")
    if raw is None:
        return None
    return PodFailurePolicy(rules=tuple(_parse_rule(r) for r in as_list(as_dict(raw).get("rules"))))


def _parse_container_status(raw: object) -> ContainerStatus:
    status = as_dict(raw)
    terminated = as_dict(status.get("state")).get("terminated")
    exit_code: int | None = None
    if isinstance(terminated, Mapping):
        # An absent exitCode decodes to Go's zero value.
        code = terminated.get("exitCode", 0)
        exit_code = code if _is_int(code) else 0
    return ContainerStatus(name=_as_str(status.get("name")), exit_code=exit_code)


def pod_failure_facts(pod: Mapping[str, Any]) -> PodFailureFacts:
    """The facts ``match_pod_failure_policy`` needs, from a pod's JSON."""
    meta = as_dict(pod.get("metadata"))
    status = as_dict(pod.get("status"))
    return PodFailureFacts(
        namespace=_as_str(meta.get("namespace")),
        name=_as_str(meta.get("name")),
        init_container_statuses=tuple(
            _parse_container_status(s) for s in as_list(status.get("initContainerStatuses"))
        ),
        container_statuses=tuple(
            _parse_container_status(s) for s in as_list(status.get("containerStatuses"))
        ),
        conditions=tuple(
            PodCondition(type=_as_str(d.get("type")), status=_as_str(d.get("status")))
            for d in map(as_dict, as_list(status.get("conditions")))
        ),
    )


# ------------------------------------------------------------------------------------ matching
def _operator_matches(exit_code: int, requirement: OnExitCodes) -> bool:
    """isOnExitCodesOperatorMatching."""
    if requirement.operator == OPERATOR_IN:
        return exit_code in requirement.values
    if requirement.operator == OPERATOR_NOT_IN:
        return exit_code not in requirement.values
    # An operator added to the API later: the requirement is not satisfied.
    return False


def _matching_container(
    statuses: Sequence[ContainerStatus], requirement: OnExitCodes
) -> ContainerStatus | None:
    """getMatchingContainerFromList: the first terminated container that fails the rule."""
    for status in statuses:
        if status.exit_code is None:
            # Still terminating: there is no exit code to match.
            continue
        if requirement.container_name is not None and requirement.container_name != status.name:
            continue
        # A container that succeeded never matches, not even NotIn without 0 in values.
        if status.exit_code != 0 and _operator_matches(status.exit_code, requirement):
            return status
    return None


def _match_on_exit_codes(pod: PodFailureFacts, requirement: OnExitCodes) -> ContainerStatus | None:
    """matchOnExitCodes: regular containers first, then init containers."""
    found = _matching_container(pod.container_statuses, requirement)
    if found is not None:
        return found
    return _matching_container(pod.init_container_statuses, requirement)


def _match_on_pod_conditions(
    pod: PodFailureFacts, patterns: Sequence[OnPodConditionsPattern]
) -> PodCondition | None:
    """matchOnPodConditions: the first pod condition that any pattern matches."""
    for condition in pod.conditions:
        for pattern in patterns:
            if condition.type == pattern.type and condition.status == pattern.status:
                return condition
    return None


def _apply_action(action: str, fail_job_message: str) -> PodFailurePolicyMatch | None:
    """The switch on a matched rule's action; None for an unknown action (rule skipped)."""
    if action == ACTION_IGNORE:
        return PodFailurePolicyMatch(None, False, ACTION_IGNORE)
    if action == ACTION_FAIL_INDEX:
        return PodFailurePolicyMatch(None, True, ACTION_FAIL_INDEX)
    if action == ACTION_COUNT:
        return PodFailurePolicyMatch(None, True, ACTION_COUNT)
    if action == ACTION_FAIL_JOB:
        return PodFailurePolicyMatch(fail_job_message, True, ACTION_FAIL_JOB)
    return None


def _match_rule(
    index: int, rule: PodFailurePolicyRule, pod: PodFailureFacts
) -> PodFailurePolicyMatch | None:
    """One iteration of matchPodFailurePolicy's loop: what the rule decides, if it matches."""
    if rule.on_exit_codes is not None:
        container = _match_on_exit_codes(pod, rule.on_exit_codes)
        if container is None:
            return None
        message = (
            f"Container {container.name} for pod {pod.namespace}/{pod.name} failed with exit "
            f"code {container.exit_code} matching {rule.action} rule at index {index}"
        )
        return _apply_action(rule.action, message)
    if rule.on_pod_conditions:
        condition = _match_on_pod_conditions(pod, rule.on_pod_conditions)
        if condition is None:
            return None
        message = (
            f"Pod {pod.namespace}/{pod.name} has condition {condition.type} "
            f"matching {rule.action} rule at index {index}"
        )
        return _apply_action(rule.action, message)
    return None


def match_pod_failure_policy(
    policy: PodFailurePolicy | None, pod: PodFailureFacts
) -> PodFailurePolicyMatch:
    """matchPodFailurePolicy: the first rule the failed pod matches decides.

    Returns (the job failure message for a FailJob rule, whether the failure counts
    towards backoffLimit, the matched action). Without a policy or a matching rule the
    failure counts and there is no action.
    """
    if policy is not None:
        for index, rule in enumerate(policy.rules):
            matched = _match_rule(index, rule, pod)
            if matched is not None:
                return matched
    return PodFailurePolicyMatch(None, True, None)


# ----------------------------------------------------------------------- job-level decisions
def facts_of(pod: FailedPod) -> PodFailureFacts:
    """The pod's facts; a pod parsed without them (running, no container exited non-zero)
    has no terminated container and is taken as having no condition."""
    if pod.failure is not None:
        return pod.failure
    return PodFailureFacts(namespace=pod.namespace, name=pod.name)


def match_pod(policy: PodFailurePolicy | None, pod: FailedPod) -> PodFailurePolicyMatch:
    """matchPodFailurePolicy for one of the job's pods."""
    return match_pod_failure_policy(policy, facts_of(pod))


def counts_as_failed(policy: PodFailurePolicy | None, pod: FailedPod) -> bool:
    """countFailed: the pod's failure counts towards backoffLimit (always without a policy;
    with one, unless an Ignore rule matches)."""
    return policy is None or match_pod(policy, pod).count_failed


def fail_job_message(policy: PodFailurePolicy | None, pods: Iterable[FailedPod]) -> str | None:
    """getFailJobMessage: the message of the first FailJob rule a failed pod of the job
    matches, in the order of ``pods`` (all the job's pods, counted or not); None without
    a policy or such a pod. The job then gets the FailureTarget condition with reason
    PodFailurePolicy and this message, then Failed."""
    if policy is None:
        return None
    for pod in pods:
        if pod.phase == _POD_FAILED:
            message = match_pod(policy, pod).message
            if message is not None:
                return message
    return None


def non_ignored_failed_count(policy: PodFailurePolicy | None, failed: Sequence[FailedPod]) -> int:
    """nonIgnoredFailedPodsCount: how many of the new ``failed`` pods count towards
    backoffLimit."""
    if policy is None:
        return len(failed)
    return sum(1 for pod in failed if counts_as_failed(policy, pod))
