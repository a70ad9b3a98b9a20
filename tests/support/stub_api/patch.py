"""The patches the operator and kopf send, applied as the API server applies them: JSON
merge patch (RFC 7386) and the part of the strategic merge patch the operator uses
(lists merged by their merge key, ``$patch: delete`` items, ``$deleteFromPrimitiveList``,
primitive lists with the merge strategy such as finalizers). Pure."""

from __future__ import annotations

import copy
from typing import Any

#: The merge keys of the lists a strategic merge patch of a pod or job may touch (the
#: ``patchMergeKey`` tags of k8s.io/api); lists not named here are replaced.
MERGE_KEYS = {
    "ownerReferences": "uid",
    "containers": "name",
    "initContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "conditions": "type",
    "ports": "containerPort",
}
#: Primitive lists with ``patchStrategy: merge``: a patch adds to them.
MERGED_PRIMITIVE_LISTS = frozenset({"finalizers"})
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"
_SET_ORDER = "$setElementOrder/"


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, null removes a key, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """A strategic merge patch of objects (``target`` is not changed)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith(_SET_ORDER) or key == "$patch":
            continue  # ordering hints change nothing a reader of the stub compares
        if key.startswith(_DELETE_PRIMITIVE):
            field = key.removeprefix(_DELETE_PRIMITIVE)
            drop = set(value or ())
            kept = [x for x in result.get(field) or () if x not in drop]
            if kept:
                result[field] = kept
            else:
                result.pop(field, None)
        elif value is None:
            result.pop(key, None)
        elif isinstance(value, list):
            result[key] = _patch_list(key, result.get(key), value)
        else:
            result[key] = strategic_merge_patch(result.get(key), value)
    return result


def _patch_list(field: str, current: Any, patch: list[Any]) -> list[Any]:
    items = list(current) if isinstance(current, list) else []
    if field in MERGED_PRIMITIVE_LISTS:
        return items + [x for x in patch if x not in items]
    merge_key = MERGE_KEYS.get(field)
    if merge_key is None:
        return copy.deepcopy(patch)
    for entry in patch:
        if not isinstance(entry, dict):
            continue
        index = next(
            (i for i, x in enumerate(items) if x.get(merge_key) == entry.get(merge_key)), None
        )
        if entry.get("$patch") == "delete":
            if index is not None:
                del items[index]
        elif index is None:
            items.append(strategic_merge_patch({}, entry))
        else:
            items[index] = strategic_merge_patch(items[index], entry)
    return items
