"""Type aliases shared by the modules that handle API objects as plain JSON dicts."""

from __future__ import annotations

from typing import Any

#: An API object, or part of one, as the API server's JSON decodes.
JsonDict = dict[str, Any]
