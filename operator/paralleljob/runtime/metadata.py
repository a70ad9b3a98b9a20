"""What the operator keeps of a job's metadata and pod template: a job runtime
(job_runtime.py) and a standby's record of it (job_records.py) alike, the metadata with
no managedFields, labels or annotations (so no kubectl last-applied-configuration), the
template as compact JSON text."""

from __future__ import annotations

import json
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


def template_text(template: object) -> str:
    """A pod template as a runtime keeps it: compact JSON text (a dict of the JSON costs
    about six times its text)."""
    return json.dumps(template, separators=(",", ":"), ensure_ascii=False)
