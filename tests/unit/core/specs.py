"""Job specs the core's tests share."""

from __future__ import annotations

from paralleljob.core.job.model import (
    INDEXED_COMPLETION,
    POD_REPLACEMENT_TERMINATING_OR_FAILED,
    JobSpec,
    SuccessPolicy,
)
from paralleljob.core.job.pod_failure_policy import PodFailurePolicy


def indexed_spec(
    completions: int,
    parallelism: int | None = None,
    *,
    backoff_limit_per_index: int | None = None,
    max_failed_indexes: int | None = None,
    success_policy: SuccessPolicy | None = None,
    pod_replacement_policy: str = POD_REPLACEMENT_TERMINATING_OR_FAILED,
    pod_failure_policy: PodFailurePolicy | None = None,
) -> JobSpec:
    """An Indexed job's spec, parallelism ``completions`` unless given."""
    return JobSpec(
        parallelism=completions if parallelism is None else parallelism,
        completions=completions,
        completion_mode=INDEXED_COMPLETION,
        backoff_limit_per_index=backoff_limit_per_index,
        max_failed_indexes=max_failed_indexes,
        success_policy=success_policy,
        pod_replacement_policy=pod_replacement_policy,
        pod_failure_policy=pod_failure_policy,
    )
