"""The success policy, case by case as upstream tests it (success_policy_test.go,
Kubernetes v1.34.4), the policy given as its batch/v1 JSON."""

from __future__ import annotations

import logging

import pytest

from paralleljob import constants as c
from paralleljob.core.job.intervals import Interval
from paralleljob.core.job.model import (
    INDEXED_COMPLETION,
    Condition,
    Job,
    JobSpec,
    JobStatus,
    SuccessPolicy,
    SuccessPolicyRule,
    parse_success_policy,
)
from paralleljob.core.job.success_policy import (
    REASON_SUCCESS_POLICY,
    matches_success_policy,
    rules_matched_message,
)
from paralleljob.core.job.sync import SyncInput, sync_context
from paralleljob.json_types import JsonDict
from tests.unit.sim import T0

MATCHED_0 = "Matched rules at index 0"


def spec(*rules: JsonDict) -> JsonDict:
    """A job spec with a successPolicy of these rules."""
    return {"successPolicy": {"rules": list(rules)}}


def indexes(value: str, count: int | None = None) -> JsonDict:
    """A rule with succeededIndexes, and succeededCount when given."""
    rule: JsonDict = {"succeededIndexes": value}
    if count is not None:
        rule["succeededCount"] = count
    return rule


def count(value: int) -> JsonDict:
    return {"succeededCount": value}


def case(
    name: str,
    job_spec: JsonDict,
    succeeded: list[Interval],
    want_message: str = "",
    completions: int = 10,
) -> object:
    """One upstream case; it matched if and only if it wants a message."""
    return pytest.param(job_spec, completions, succeeded, want_message != "", want_message, id=name)


# TestMatchSuccessPolicy: 31 of its 32 cases. Not ported: "JobSuccessPolicy is disabled"
# (it needs the gate off; it is locked on in v1.34, and with it on the case is "successPolicy
# is null"). "rules.succeededIndexes is specified; succeededIndexes are nothing" runs upstream
# with the gate off too, but its inputs still mean something with the gate on, and give the
# same result (no succeeded index, no match), so it is ported.
MATCH_CASES = [
    case("successPolicy is null", {}, [(0, 0)]),
    case("any rules are nothing", spec(), [(0, 0)]),
    case("rules.succeededIndexes is invalid format", spec(indexes("invalid-form")), [(0, 0)]),
    case(
        "rules.succeededIndexes is specified; succeededIndexes matched rules",
        spec(indexes("0-2")),
        [(0, 2), (4, 7)],
        MATCHED_0,
    ),
    case(
        "rules.succeededIndexes is specified; succeededIndexes didn't match rules",
        spec(indexes("3")),
        [(0, 2)],
    ),
    case(
        "rules.succeededCount is specified; succeededIndexes matched rules",
        spec(count(2)),
        [(0, 2)],
        MATCHED_0,
    ),
    case(
        "rules.succeededCount is specified; succeededIndexes didn't match rules",
        spec(count(4)),
        [(0, 2)],
    ),
    case(
        "multiple rules; rules.succeededIndexes is specified; succeededIndexes met one of rules",
        spec(indexes("9"), indexes("4,6")),
        [(0, 2), (4, 7)],
        "Matched rules at index 1",
    ),
    case(
        "multiple rules; rules.succeededIndexes is specified; succeededIndexes met all rules",
        spec(indexes("0,1"), indexes("5")),
        [(0, 2), (4, 7)],
        MATCHED_0,
    ),
    case(
        "rules.succeededIndexes and rules.succeededCount are specified; "
        "succeededIndexes met all rules",
        spec(indexes("3-6", 2)),
        [(0, 2), (4, 7)],
        MATCHED_0,
    ),
    case(
        "rules.succeededIndexes and rules.succeededCount are specified; "
        "succeededIndexes didn't match rules",
        spec(indexes("3-6", 2)),
        [(0, 2), (6, 7)],
    ),
    case(
        "rules.succeededIndexes is specified; succeededIndexes are nothing",
        spec(count(4)),
        [],
    ),
    case(
        "rules.succeededIndexes is specified; succeededIndexes matched rules; "
        "rules is proper subset of succeededIndexes",
        spec(indexes("2-4,6-8")),
        [(1, 5), (6, 9)],
        MATCHED_0,
    ),
    case(
        "rules.succeededIndexes is specified; succeededIndexes matched rules; "
        "rules equals succeededIndexes",
        spec(indexes("2-4,6-9")),
        [(2, 4), (6, 9)],
        MATCHED_0,
    ),
    case(
        "rules.succeededIndexes is specified; succeededIndexes matched rules; "
        "rules is subset of succeededIndexes",
        spec(indexes("2-4,8-12")),
        [(2, 5), (7, 15)],
        MATCHED_0,
    ),
    case(
        "rules.succeededIndexes is specified; succeededIndexes didn't match rules; "
        "rules is an empty set",
        spec(indexes("")),
        [(1, 3)],
    ),
    case(
        "rules.succeededIndexes is specified; succeededIndexes didn't match rules; "
        "succeededIndexes is an empty set",
        spec(indexes("")),
        [],
    ),
    case(
        "rules.succeededIndexes is specified; succeededIndexes didn't match rules; "
        "rules and succeededIndexes are empty set",
        spec(indexes("")),
        [],
    ),
    case(
        "rules.succeededIndexes is specified; succeededIndexes didn't match rules; "
        "all elements of rules.succeededIndexes aren't included in succeededIndexes",
        spec(indexes("10-12,14-16")),
        [(1, 3), (5, 7)],
    ),
    case(
        "rules.succeededIndexes is specified; succeededIndexes didn't match rules; "
        "rules overlaps succeededIndexes at first",
        spec(indexes("1-3,5-7")),
        [(2, 4), (6, 8)],
    ),
    case(
        "rules.succeededIndexes and rules.succeededCount are specified; "
        "succeededIndexes matched rules; rules overlaps succeededIndexes at first",
        spec(indexes("1-3,5-7", 4)),
        [(2, 4), (6, 8)],
        MATCHED_0,
    ),
    case(
        "rules.succeededIndexes is specified; succeededIndexes didn't match rules; "
        "rules overlaps succeededIndexes at last",
        spec(indexes("2-4,6-9")),
        [(1, 3), (5, 7)],
    ),
    case(
        "rules.succeededIndexes and rules.succeededCount are specified; "
        "succeededIndexes matched rules; rules overlaps succeededIndexes at last",
        spec(indexes("2-4,6-9", 4)),
        [(1, 3), (5, 7)],
        MATCHED_0,
    ),
    case(
        "rules.succeededIndexes is specified; succeededIndexes didn't match rules; "
        "rules completely overlaps succeededIndexes",
        spec(indexes("0-4,6-9")),
        [(1, 3), (7, 8)],
    ),
    case(
        "rules.succeededIndexes and rules.succeededCount are specified; "
        "succeededIndexes matched rules; rules completely overlaps succeededIndexes",
        spec(indexes("0-4,6-9", 5)),
        [(1, 3), (7, 8)],
        MATCHED_0,
    ),
    case(
        "rules.succeededIndexes is specified; succeededIndexes didn't match rules; "
        "rules overlaps multiple succeededIndexes at last",
        spec(indexes("0-6,8-9")),
        [(1, 3), (5, 9)],
    ),
    case(
        "rules.succeededIndexes and rules.succeededCount are specified; "
        "succeededIndexes matched rules; rules overlaps multiple succeededIndexes at last",
        spec(indexes("0-6,8-9", 7)),
        [(1, 3), (5, 9)],
        MATCHED_0,
    ),
    case(
        "rules.succeededIndexes is specified; succeededIndexes didn't match rules; "
        "rules overlaps succeededIndexes at first, and rules equals succeededIndexes at last",
        spec(indexes("0-5,7-9")),
        [(1, 5), (7, 10)],
    ),
    case(
        "rules.succeededIndexes and rules.succeededCount are specified; "
        "succeededIndexes matched rules; rules overlaps succeededIndexes at first, "
        "and rules equals succeededIndexes at last",
        spec(indexes("0-5,7-9", 8)),
        [(1, 5), (7, 10)],
        MATCHED_0,
    ),
    case(
        "rules.succeededIndexes is specified; succeededIndexes didn't match rules; "
        "the first rules overlaps succeededIndexes at first",
        spec(indexes("0-3,6-9")),
        [(1, 10)],
    ),
    case(
        "rules.succeededIndexes and rules.succeededCount are specified; "
        "succeededIndexes matched rules; the first rules overlaps succeededIndexes at first",
        spec(indexes("0-3,6-9", 7)),
        [(1, 10)],
        MATCHED_0,
    ),
]


@pytest.mark.parametrize(
    ("job_spec", "completions", "succeeded", "want_matched", "want_message"), MATCH_CASES
)
def test_match_success_policy(
    job_spec: JsonDict,
    completions: int,
    succeeded: list[Interval],
    want_matched: bool,
    want_message: str,
) -> None:
    policy = parse_success_policy(job_spec)
    assert matches_success_policy(policy, "job", completions, succeeded) == (
        want_matched,
        want_message,
    )


# ----------------------------------------------------------------------------- not upstream
# The parsing, the local copy of parseIndexesFromString (seen through which rule indexes
# match) and the condition helpers.
def test_parse_success_policy() -> None:
    job_spec = spec(indexes("0-2", 2), count(3), {"succeededIndexes": "1"})
    assert parse_success_policy(job_spec) == SuccessPolicy(
        rules=(
            SuccessPolicyRule("0-2", 2),
            SuccessPolicyRule(succeeded_count=3),
            SuccessPolicyRule("1"),
        )
    )


@pytest.mark.parametrize(
    ("job_spec", "expected"),
    [
        pytest.param({}, None, id="unset"),
        pytest.param({"successPolicy": None}, None, id="null"),
        pytest.param({"successPolicy": {"rules": []}}, SuccessPolicy(), id="no rules"),
    ],
)
def test_parse_unset_or_empty_policy(job_spec: JsonDict, expected: SuccessPolicy | None) -> None:
    assert parse_success_policy(job_spec) == expected


@pytest.mark.parametrize(
    ("rule_indexes", "succeeded", "matched"),
    [
        # Adjacent intervals (upstream merges them) make one run of indexes.
        pytest.param("0,1-2", [(0, 2)], True, id="adjacent intervals"),
        # Indexes at or past completions (10) are dropped: the rest must succeed.
        pytest.param("8-15", [(8, 9)], True, id="last capped below completions"),
        pytest.param("9,10,2", [(9, 9)], True, id="parsing stops at completions"),
        # A corrupted interval is skipped, not the whole rule (Go's strconv.Atoi).
        pytest.param("x,3", [(3, 3)], True, id="corrupted interval skipped"),
        pytest.param(" 3,4", [(4, 4)], True, id="spaces are not a number"),
        pytest.param("+3", [(3, 3)], True, id="a plus sign is"),
        pytest.param("1-2-3", [(1, 2)], True, id="past the second limit ignored"),
        pytest.param("-1", [(0, 9)], False, id="a leading hyphen is corrupted"),
    ],
)
def test_rule_indexes_are_parsed_as_upstream(
    rule_indexes: str, succeeded: list[Interval], matched: bool
) -> None:
    policy = SuccessPolicy(rules=(SuccessPolicyRule(rule_indexes),))
    assert matches_success_policy(policy, "job", 10, succeeded)[0] is matched


def test_a_corrupted_interval_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    policy = SuccessPolicy(rules=(SuccessPolicyRule("invalid-form"),))
    with caplog.at_level(logging.INFO, logger="paralleljob.core.job.intervals"):
        matches_success_policy(policy, "myjob", 10, [(0, 0)])
    assert "job=myjob interval='invalid-form'" in caplog.text


def test_a_malformed_rule_keeps_the_index_of_the_rules_after_it() -> None:
    policy = parse_success_policy({"successPolicy": {"rules": ["not a rule", count(1)]}})
    assert matches_success_policy(policy, "job", 10, [(0, 0)]) == (True, rules_matched_message(1))


@pytest.mark.parametrize(
    ("conditions", "found"),
    [
        pytest.param([], False, id="none"),
        pytest.param([Condition(c.COND_SUCCESS_CRITERIA_MET, "False")], False, id="false"),
        pytest.param(
            [
                Condition(c.COND_FAILURE_TARGET, "True"),
                Condition(c.COND_SUCCESS_CRITERIA_MET, "True", REASON_SUCCESS_POLICY),
            ],
            True,
            id="true",
        ),
    ],
)
def test_a_stored_success_criteria_met_condition_is_the_verdict(
    conditions: list[Condition], found: bool
) -> None:
    """hasSuccessCriteriaMetCondition, where syncJob reads it: a True SuccessCriteriaMet
    condition of an earlier sync stands as the verdict, before a FailureTarget."""
    spec = JobSpec(completions=3, parallelism=3, completion_mode=INDEXED_COMPLETION)
    job = Job("ns", "job", "uid", spec, JobStatus(conditions=tuple(conditions)))
    verdict = sync_context(SyncInput(job=job, pods=(), now=T0)).verdict
    assert (verdict is not None and verdict.type == c.COND_SUCCESS_CRITERIA_MET) is found
