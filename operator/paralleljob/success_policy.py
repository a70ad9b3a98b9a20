"""The success policy of an Indexed job: whether its succeeded indexes meet a rule.

Ports ``pkg/controller/job/success_policy.go`` (Kubernetes v1.34.4). What differs:

* The policy is a small frozen dataclass parsed from the job spec's JSON
  (``parse_success_policy``), not the API type.
* ``matches_success_policy`` returns ``(matched, message)``; upstream's
  ``matchSuccessPolicy`` returns ``(message, matched)``.
* The ``JobSuccessPolicy`` gate is GA and locked on in v1.34, and so are the gates
  behind ``delayTerminalCondition`` (``JobManagedBy``, ``JobPodReplacementPolicy``), so
  nothing here depends on a gate.
* Intervals of indexes are ``(first, last)`` tuples, and the ``"1,3-5"`` parser
  (upstream ``parseIndexesFromString``) and ``total`` are local copies of
  ``indexed_job_utils.go``'s. They should later use ``indexed.py``'s ordered intervals,
  once that module exists.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from . import constants as c
from .model import Condition, find_condition

log = logging.getLogger(__name__)

#: batch/v1 JobReasonSuccessPolicy: the reason of the SuccessCriteriaMet condition a
#: matched rule adds, and of the Complete condition that follows it.
REASON_SUCCESS_POLICY: Final = "SuccessPolicy"
#: The start of that condition's message; the matched rule's index follows.
RULES_MATCHED_MSG: Final = "Matched rules at index"

#: A run of indexes, first and last included (upstream ``interval``).
Interval: TypeAlias = tuple[int, int]


@dataclass(frozen=True)
class SuccessPolicyRule:
    """batch/v1 SuccessPolicyRule: None means the field is unset and never evaluated."""

    succeeded_indexes: str | None = None
    succeeded_count: int | None = None


@dataclass(frozen=True)
class SuccessPolicy:
    """batch/v1 SuccessPolicy: alternative rules, evaluated in order."""

    rules: tuple[SuccessPolicyRule, ...] = ()


def rules_matched_message(index: int) -> str:
    """The SuccessCriteriaMet message for the rule at ``index`` ("Matched rules at index %d")."""
    return f"{RULES_MATCHED_MSG} {index}"


# ------------------------------------------------------------------------------------- parsing
def _parse_rule(raw: object) -> SuccessPolicyRule:
    # A malformed rule keeps its place, so later rules keep their index (the index is in
    # the condition message); with neither field set it matches nothing.
    rule = raw if isinstance(raw, Mapping) else {}
    indexes = rule.get("succeededIndexes")
    count = rule.get("succeededCount")
    return SuccessPolicyRule(
        succeeded_indexes=indexes if isinstance(indexes, str) else None,
        # bool is an int in Python, never in JSON.
        succeeded_count=count if isinstance(count, int) and not isinstance(count, bool) else None,
    )


def parse_success_policy(spec: Mapping[str, Any]) -> SuccessPolicy | None:
    """``spec.successPolicy`` of a job's spec (batch/v1 JSON), None when unset."""
    raw = spec.get("successPolicy")
    if raw is None:
        return None
    rules = raw.get("rules") if isinstance(raw, Mapping) else None
    return SuccessPolicy(
        rules=tuple(_parse_rule(r) for r in (rules if isinstance(rules, list) else []))
    )


# ----------------------------------------------- intervals (to move to indexed.py's later)
# strconv.Atoi: an optional sign and ASCII decimal digits, within int64. Python's int()
# would also take spaces, underscores and other scripts' digits.
_ATOI = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _atoi(text: str) -> int | None:
    """strconv.Atoi; None where Go returns an error."""
    if _ATOI.fullmatch(text) is None:
        return None
    value = int(text)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


def _parse_interval(text: str, completions: int) -> Interval | None:
    """One "a" or "a-b" of parseIndexesFromString, the last index capped below completions;
    None if it cannot be parsed. The caller stops at a first index >= completions."""
    limits = text.split("-")
    first = _atoi(limits[0])
    if first is None:
        return None
    if first >= completions or len(limits) == 1:
        return first, first
    last = _atoi(limits[1])
    if last is None:
        return None
    return first, min(last, completions - 1)


def _parse_indexes(indexes: str, completions: int, job_name: str) -> list[Interval]:
    """parseIndexesFromString: "1,3-5" as ordered intervals below ``completions``; adjacent
    intervals merge, corrupted ones are skipped (and logged, as upstream does)."""
    result: list[Interval] = []
    if indexes == "":
        return result
    for text in indexes.split(","):
        interval = _parse_interval(text, completions)
        if interval is None:
            log.info("Corrupted indexes interval, ignoring: job=%s interval=%r", job_name, text)
            continue
        first, last = interval
        if first >= completions:
            break
        if result and result[-1][1] == first - 1:
            result[-1] = (result[-1][0], last)
        else:
            result.append((first, last))
    return result


def _total(intervals: Sequence[Interval]) -> int:
    """orderedIntervals.total: how many indexes the intervals hold."""
    return sum(last - first + 1 for first, last in intervals)


# ------------------------------------------------------------------------------------ matching
def _match_succeeded_indexes_rule(
    rule_indexes: Sequence[Interval],
    succeeded_indexes: Sequence[Interval],
    succeeded_count: int | None,
) -> bool:
    """matchSucceededIndexesRule: all of the rule's indexes succeeded, or at least
    ``succeeded_count`` of them. One merge-like pass over both ordered lists."""
    contains = rule_at = succeeded_at = 0
    while rule_at < len(rule_indexes) and succeeded_at < len(succeeded_indexes):
        rule_first, rule_last = rule_indexes[rule_at]
        done_first, done_last = succeeded_indexes[succeeded_at]
        overlap = min(rule_last, done_last) - max(rule_first, done_first) + 1
        if overlap > 0:
            contains += overlap
        if done_last < rule_last:
            # The succeeded interval is behind: the next one may overlap this rule interval.
            succeeded_at += 1
        elif done_last > rule_last:
            # The rule interval is behind.
            rule_at += 1
        else:
            # Both end at the same index: move past both.
            succeeded_at += 1
            rule_at += 1
    return contains == _total(rule_indexes) or (
        succeeded_count is not None and contains >= succeeded_count
    )


def _rule_matches(
    rule: SuccessPolicyRule, completions: int, succeeded: Sequence[Interval], job_name: str
) -> bool:
    """One iteration of matchSuccessPolicy's loop."""
    if rule.succeeded_indexes is not None:
        required = _parse_indexes(rule.succeeded_indexes, completions, job_name)
        # Nothing parsed (an invalid format, say): the rule cannot match.
        return bool(required) and _match_succeeded_indexes_rule(
            required, succeeded, rule.succeeded_count
        )
    return rule.succeeded_count is not None and _total(succeeded) >= rule.succeeded_count


def matches_success_policy(
    policy: SuccessPolicy | None,
    job_name: str,
    completions: int,
    succeeded_indexes: Sequence[Interval],
) -> tuple[bool, str]:
    """matchSuccessPolicy: whether the succeeded indexes meet a rule, and the message of
    the SuccessCriteriaMet condition for the first rule they meet ("" when none).

    ``succeeded_indexes`` are ordered, non-overlapping ``(first, last)`` intervals;
    ``job_name`` only names the job in the log line about a corrupted rule interval.
    """
    if policy is None or not succeeded_indexes:
        return False, ""
    for index, rule in enumerate(policy.rules):
        if _rule_matches(rule, completions, succeeded_indexes, job_name):
            return True, rules_matched_message(index)
    return False, ""


# ------------------------------------------------------------------------ the stored condition
def has_success_criteria_met_condition(conditions: Sequence[Condition]) -> Condition | None:
    """hasSuccessCriteriaMetCondition: the job's SuccessCriteriaMet condition if it is True."""
    met = find_condition(conditions, c.COND_SUCCESS_CRITERIA_MET)
    return met if met is not None and met.status == "True" else None


def is_success_criteria_met_condition(cond: Condition | None) -> bool:
    """isSuccessCriteriaMetCondition: ``cond`` is a True SuccessCriteriaMet condition."""
    return cond is not None and cond.type == c.COND_SUCCESS_CRITERIA_MET and cond.status == "True"
