"""The success policy of an Indexed job: whether its succeeded indexes meet a rule.

Ports ``pkg/controller/job/success_policy.go`` (Kubernetes v1.37.2). What differs:

* The policy is a small frozen dataclass parsed from the job spec's JSON, not the API
  type; the dataclasses and their parser (``SuccessPolicy``, ``SuccessPolicyRule``,
  ``parse_success_policy``) live in ``model.py``, as the job's ``JobSpec`` holds the
  policy.
* ``matches_success_policy`` returns ``(matched, message)``; upstream's
  ``matchSuccessPolicy`` returns ``(message, matched)``.
* No gate: v1.37 removed ``JobSuccessPolicy`` and ``delayTerminalCondition`` (terminal
  conditions always wait for the terminating pods).
* Intervals of indexes are ``intervals.py``'s ordered ``(first, last)`` tuples, parsed
  by its ``parse_indexes_from_string`` and counted by its ``intervals_total``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from .intervals import Interval, intervals_total, parse_indexes_from_string
from .model import SuccessPolicy, SuccessPolicyRule

#: batch/v1 JobReasonSuccessPolicy: the reason of the SuccessCriteriaMet condition a
#: matched rule adds, and of the Complete condition that follows it.
REASON_SUCCESS_POLICY: Final = "SuccessPolicy"
#: The start of that condition's message; the matched rule's index follows.
RULES_MATCHED_MSG: Final = "Matched rules at index"


def rules_matched_message(index: int) -> str:
    """The SuccessCriteriaMet message for the rule at ``index`` ("Matched rules at index %d")."""
    return f"{RULES_MATCHED_MSG} {index}"


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
    return contains == intervals_total(rule_indexes) or (
        succeeded_count is not None and contains >= succeeded_count
    )


def _rule_matches(
    rule: SuccessPolicyRule, completions: int, succeeded: Sequence[Interval], job_name: str
) -> bool:
    """One iteration of matchSuccessPolicy's loop."""
    if rule.succeeded_indexes is not None:
        required = parse_indexes_from_string(rule.succeeded_indexes, completions, job_name)
        # Nothing parsed (an invalid format, say): the rule cannot match.
        return bool(required) and _match_succeeded_indexes_rule(
            required, succeeded, rule.succeeded_count
        )
    return rule.succeeded_count is not None and intervals_total(succeeded) >= rule.succeeded_count


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
