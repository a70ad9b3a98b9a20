"""The rest of batch/v1 on real pods (issue 12): Indexed jobs, pod failure policy,
backoffLimitPerIndex, success policy and podReplacementPolicy; and an Indexed job of 1,000
on the kwok node. Each as the Job controller does it (its v1.34.4 code is the reference)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.support.wait import wait_until

from .conftest import Operator
from .support import (
    Kubectl,
    PodWatch,
    busybox_template,
    is_active,
    kwok_template,
    parse_table,
    phase,
    terminated,
)

INDEX_ANNOTATION = "paralleljob.dev/job-completion-index"
IGNORED_FAILURES_ANNOTATION = "paralleljob.dev/job-index-ignored-failure-count"
#: A short pod-failure back-off for these jobs (spec.podFailureBackoff, beyond the Job).
QUICK_BACKOFF = {"initialSeconds": 1, "maxSeconds": 2}


def _finished(k: Kubectl, name: str, timeout: float = 120) -> str:
    outcome: str = wait_until(
        lambda: k.finished(name), timeout=timeout, interval=0.5, what=f"{name} done"
    )
    return outcome


def _reason(k: Kubectl, name: str, ctype: str) -> str:
    cond = k.condition(name, ctype) or {}
    return str(cond.get("reason", ""))


def _with_env(template: dict[str, Any], name: str, annotation: str) -> dict[str, Any]:
    """``template`` with env ``name`` from the pod's annotation (the downward API)."""
    template = copy.deepcopy(template)
    [container] = template["spec"]["containers"]
    path = f"metadata.annotations['{annotation}']"
    container["env"] = [{"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}]
    return template


@pytest.mark.realnode
def test_an_indexed_job_runs_one_pod_per_index_each_knowing_its_index(
    operator: Operator, k: Kubectl
) -> None:
    name = "indexed"
    # Each pod reports its index and host name in its termination message.
    template = busybox_template('echo "$JOB_COMPLETION_INDEX $(hostname)" >/dev/termination-log')
    k.create_pj(name, template, completions=5, parallelism=3, completionMode="Indexed")
    assert _finished(k, name) == "Complete"
    status = k.status(name)
    assert (status.get("completedIndexes"), status.get("succeeded")) == ("0-4", 5)
    pods = k.pods(name)
    assert len(pods) == 5 and all(phase(p) == "Succeeded" for p in pods)
    seen = set()
    for pod in pods:
        index = pod["metadata"]["annotations"][INDEX_ANNOTATION]
        assert pod["metadata"]["labels"][INDEX_ANNOTATION] == index
        assert pod["metadata"]["name"].startswith(f"{name}-{index}-")
        assert terminated(pod)["message"].split() == [index, f"{name}-{index}"]
        seen.add(int(index))
    assert seen == set(range(5))
    assert k.row(name).completions == "5/5"


@pytest.mark.realnode
@pytest.mark.warnings("PodFailurePolicy")
def test_a_pod_failure_policy_ignores_exit_42_and_fails_the_job_at_once_on_exit_3(
    operator: Operator, k: Kubectl
) -> None:
    policy = {
        "rules": [
            {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [42]}},
            {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [3]}},
        ]
    }
    # Index 1's first pod exits 42: ignored (not counted, no back-off), replaced; its
    # replacement, which carries one ignored failure, succeeds.
    ignored = _with_env(
        busybox_template(
            '[ "$JOB_COMPLETION_INDEX" = 1 ] && [ "${IGNORED:-0}" = 0 ] && exit 42; exit 0'
        ),
        "IGNORED",
        IGNORED_FAILURES_ANNOTATION,
    )
    k.create_pj(
        "ignore-42",
        ignored,
        completions=2,
        parallelism=2,
        completionMode="Indexed",
        backoffLimitPerIndex=1,
        backoffLimit=0,
        podFailurePolicy=policy,
    )
    k.create_pj(
        "fail-on-3",
        busybox_template("exit 3"),
        completions=3,
        backoffLimit=6,
        podFailurePolicy=policy,
    )
    assert _finished(k, "ignore-42") == "Complete"
    status = k.status("ignore-42")
    assert (status.get("succeeded"), status.get("failed", 0)) == (2, 0)
    assert [terminated(p)["exitCode"] for p in k.pods("ignore-42")].count(42) == 1
    assert _finished(k, "fail-on-3") == "Failed"
    assert _reason(k, "fail-on-3", "Failed") == "PodFailurePolicy"
    message = (k.condition("fail-on-3", "Failed") or {}).get("message", "")
    assert "failed with exit code 3 matching FailJob rule at index 1" in message
    assert k.status("fail-on-3").get("failed") == 1, "failed at once, backoffLimit unused"


@pytest.mark.realnode
@pytest.mark.warnings("FailedIndexes")
def test_backoff_limit_per_index_fails_only_the_failing_index(
    operator: Operator, k: Kubectl
) -> None:
    name = "per-index"
    template = busybox_template('[ "$JOB_COMPLETION_INDEX" = 1 ] && exit 1; exit 0')
    k.create_pj(
        name,
        template,
        completions=3,
        parallelism=3,
        completionMode="Indexed",
        backoffLimitPerIndex=1,
        podFailureBackoff=QUICK_BACKOFF,
    )
    assert _finished(k, name) == "Failed"
    assert _reason(k, name, "Failed") == "FailedIndexes"
    status = k.status(name)
    assert (status.get("completedIndexes"), status.get("failedIndexes")) == ("0,2", "1")
    assert (status.get("succeeded"), status.get("failed")) == (2, 2), "index 1: 1 + 1 retry"


@pytest.mark.realnode
def test_a_success_policy_on_index_0_completes_the_job_and_stops_the_others(
    operator: Operator, k: Kubectl
) -> None:
    name = "lead"
    template = busybox_template('[ "$JOB_COMPLETION_INDEX" = 0 ] && exit 0; sleep 300')
    k.create_pj(
        name,
        template,
        completions=3,
        parallelism=3,
        completionMode="Indexed",
        successPolicy={"rules": [{"succeededIndexes": "0"}]},
    )
    assert _finished(k, name) == "Complete"
    assert _reason(k, name, "Complete") == "SuccessPolicy"
    assert _reason(k, name, "SuccessCriteriaMet") == "SuccessPolicy"
    status = k.status(name)
    assert (status.get("completedIndexes"), status.get("succeeded")) == ("0", 1)
    wait_until(
        lambda: not any(is_active(p) for p in k.pods(name)), timeout=30, what="others stopped"
    )


@pytest.mark.realnode
def test_pod_replacement_policy_failed_waits_for_the_old_pod_to_be_gone(
    operator: Operator, k: Kubectl, core_v1: Any
) -> None:
    name = "replace-failed"
    # The pod takes 4 s to stop after SIGTERM: it is terminating that long.
    template = busybox_template("trap 'sleep 4; exit 1' TERM; sleep 300 & wait")
    template["spec"]["terminationGracePeriodSeconds"] = 30

    def one_at_a_time(pods: dict[str, dict[str, Any]]) -> str | None:
        alive = [p for p in pods.values() if phase(p) not in ("Succeeded", "Failed")]
        return f"{len(alive)} pods not terminal" if len(alive) > 1 else None

    with PodWatch(core_v1, k.ns, name, one_at_a_time) as watch:
        k.create_pj(
            name,
            template,
            completions=1,
            podReplacementPolicy="Failed",
            podFailureBackoff=QUICK_BACKOFF,
        )
        [first] = wait_until(
            lambda: [p for p in k.pods(name) if phase(p) == "Running"] or None,
            timeout=60,
            what="the first pod running",
        )
        k.run("delete", "pod", first["metadata"]["name"], "--wait=false")
        wait_until(lambda: len(watch.created) == 2, timeout=60, what="a replacement pod")
        assert k.status(name).get("terminating", 0) == 0
    assert watch.errors == [], "a replacement started while the old pod was terminating"


@pytest.mark.kwok
def test_an_indexed_job_of_1000_on_kwok_completes_every_index(
    operator: Operator, k: Kubectl
) -> None:
    name = "indexed-1000"
    k.create_pj(
        name, kwok_template("1s"), completions=1000, parallelism=100, completionMode="Indexed"
    )
    assert _finished(k, name, timeout=300) == "Complete"
    status = k.status(name)
    assert (status.get("completedIndexes"), status.get("succeeded")) == ("0-999", 1000)
    indexes = [p["metadata"]["annotations"][INDEX_ANNOTATION] for p in k.pods(name)]
    assert sorted(map(int, indexes)) == list(range(1000)), "one pod per index"


def test_wide_output_lists_every_container_and_image(operator: Operator, k: Kubectl) -> None:
    name = "two-containers"
    template = busybox_template("true")
    sidecar = {**template["spec"]["containers"][0], "name": "sidecar"}
    template["spec"]["containers"].append(sidecar)
    k.create_pj(name, template, suspend=True)
    image = sidecar["image"]

    def wide() -> dict[str, str] | None:
        [row] = parse_table(k.run("get", "pj", name, "-o", "wide").stdout)
        return row if row["CONTAINERS"] == "main,sidecar" else None

    row = wait_until(wide, timeout=30, what="CONTAINERS main,sidecar")
    assert row["IMAGES"] == f"{image},{image}"
