"""evolve: dataclasses.replace's result, by a cheaper copy where that is the same."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest

from paralleljob.core import JobStatus
from paralleljob.core.dataclass_evolve import evolve
from paralleljob.core.job.model import Condition


def test_it_gives_what_replace_gives_and_leaves_the_original() -> None:
    status = JobStatus(active=2, conditions=(Condition("Suspended", "False"),), ready=1)
    changes = {"active": 3, "start_time": datetime(2026, 1, 2, tzinfo=UTC), "ready": 0}
    evolved = evolve(status, **changes)  # type: ignore[arg-type]
    assert evolved == dataclasses.replace(status, **changes)  # type: ignore[arg-type]
    assert type(evolved) is JobStatus
    assert (status.active, status.ready, status.start_time) == (2, 1, None)
    assert evolved.conditions is status.conditions


def test_an_unknown_field_is_refused_as_replace_refuses_it() -> None:
    with pytest.raises(TypeError, match="no field actve"):
        evolve(JobStatus(), actve=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        dataclasses.replace(JobStatus(), actve=1)  # type: ignore[call-arg]


@dataclass(frozen=True)
class Checked:
    value: int

    def __post_init__(self) -> None:
        if self.value < 0:
            raise ValueError("negative")


@dataclass(frozen=True)
class Derived:
    value: int
    seen: list[int] = field(init=False, default_factory=list)


@pytest.mark.parametrize("kind", [Checked, Derived])
def test_what_a_copy_would_get_wrong_goes_to_replace(kind: type[Checked | Derived]) -> None:
    """A __post_init__ must run on the new value, a field out of __init__ is made anew."""
    if kind is Checked:
        with pytest.raises(ValueError, match="negative"):
            evolve(Checked(1), value=-1)
    else:
        first = Derived(1)
        assert evolve(first, value=2).seen is not first.seen
