"""Type aliases shared by the modules that handle API objects as plain JSON dicts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: An API object, or part of one, as the API server's JSON decodes.
JsonDict = dict[str, Any]


def as_dict(value: object) -> Mapping[str, Any]:
    """``value`` if it is a JSON object, else an empty one: a field the API server may
    leave out, or a user may set to something else, read without a check at each use."""
    return value if isinstance(value, Mapping) else {}


def as_list(value: object) -> Sequence[Any]:
    """``value`` if it is a JSON array, else an empty one (as :func:`as_dict`)."""
    return value if isinstance(value, list) else []
