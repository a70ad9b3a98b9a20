"""What the operator keeps of a job's metadata: a job runtime (runtime.py) and a
standby's record of it (job_records.py) alike, with no managedFields, labels or
annotations (so no kubectl last-applied-configuration)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, Final

from ..json_types import JsonDict

#: The metadata fields kept.
KEPT_METADATA: Final = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "deletionTimestamp",
)


def compact_metadata(meta: Mapping[str, Any]) -> JsonDict:
    """What a runtime keeps of a job's metadata: the fields of :data:`KEPT_METADATA`."""
    kept: JsonDict = {key: meta[key] for key in KEPT_METADATA if key in meta}
    namespace = kept.get("namespace")
    if isinstance(namespace, str):
        kept["namespace"] = sys.intern(namespace)  # one string for a namespace's jobs
    return kept
