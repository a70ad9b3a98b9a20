"""``evolve``: dataclasses.replace for the core's frozen value types, at a sixth of its
cost.

A sync evolves its job's JobStatus (22 fields) five times or so. dataclasses.replace
reads every field, calls ``__init__`` with all of them, and sets each through
``object.__setattr__``: 24 µs a call on the benchmark VM, some 3.6 CPU-seconds when a
takeover syncs 30,000 jobs (issue 47's failover target is 10 s). A frozen dataclass
with no ``__post_init__``, no slots and every field in ``__init__`` is copied here by
its ``__dict__`` instead (4 µs): what ``__init__`` would do for it, as every field is
given. Any other class goes to dataclasses.replace.

To the type checker ``evolve`` *is* dataclasses.replace, so mypy's dataclass plugin
checks each call's field names and types as it checks replace's.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any

__all__ = ["evolve"]


@functools.cache
def _copyable_fields(cls: Any) -> frozenset[str] | None:
    """The fields ``evolve`` may set on a ``cls`` it copies by ``__dict__``; None for a
    class it leaves to dataclasses.replace."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or hasattr(cls, "__post_init__"):
        return None
    fields = dataclasses.fields(cls)
    if "__slots__" in cls.__dict__ or not all(f.init for f in fields):
        return None
    return frozenset(f.name for f in fields)


def _evolve(obj: Any, /, **changes: Any) -> Any:
    cls = obj.__class__
    names = _copyable_fields(cls)
    if names is None:
        return dataclasses.replace(obj, **changes)
    unknown = changes.keys() - names
    if unknown:
        raise TypeError(f"{cls.__name__} has no field {', '.join(sorted(unknown))}")
    new = object.__new__(cls)
    state = new.__dict__
    state.update(obj.__dict__)
    state.update(changes)
    return new


if TYPE_CHECKING:
    from dataclasses import replace as evolve
else:
    evolve = _evolve
