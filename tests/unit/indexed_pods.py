"""Test pods of Indexed jobs: a :class:`~paralleljob.core.job.model.PodInfo` with the index
fields its annotations would give it, read as ``model.parse_pod`` reads them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from paralleljob.core.job.kind import PARALLELJOB
from paralleljob.core.job.model import (
    PodInfo,
    get_completion_index,
    get_index_failure_count,
    get_index_ignored_failure_count,
)


def indexed_pod(info: PodInfo, annotations: Mapping[str, Any] | None) -> PodInfo:
    """``info`` with the index fields read from ``annotations`` (its
    ``metadata.annotations``): completion index, failure and ignored failure counts."""
    return replace(
        info,
        completion_index=get_completion_index(annotations, PARALLELJOB.completion_index_key),
        index_failure_count=get_index_failure_count(
            annotations, PARALLELJOB.index_failure_count_key
        ),
        index_ignored_failure_count=get_index_ignored_failure_count(
            annotations, PARALLELJOB.index_ignored_failure_count_key
        ),
    )
