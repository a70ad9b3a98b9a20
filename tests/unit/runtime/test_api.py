"""The API seam (api.py): the protocols and the error their calls raise."""

from __future__ import annotations

import inspect

import pytest

from paralleljob.runtime.api import ApiError, ControllerApi, EventSink
from paralleljob.runtime.kube import Kube
from tests.unit.fake_api import FakeApi

# mypy checks that both satisfy the protocols structurally, signatures included.
CONTROLLER_APIS: list[type[ControllerApi]] = [Kube, FakeApi]
EVENT_SINKS: list[type[EventSink]] = [Kube, FakeApi]


def _calls(cls: type) -> set[str]:
    return {name for name in dir(cls) if inspect.iscoroutinefunction(getattr(cls, name))}


@pytest.mark.parametrize(
    ("protocol", "implementations"),
    [(ControllerApi, CONTROLLER_APIS), (EventSink, EVENT_SINKS)],
    ids=["ControllerApi", "EventSink"],
)
def test_kube_and_the_fake_make_every_call_of_the_protocols(
    protocol: type, implementations: list[type]
) -> None:
    calls = _calls(protocol)
    assert calls, "the protocol lists its calls"
    for implementation in implementations:
        assert calls <= _calls(implementation), implementation.__name__


@pytest.mark.parametrize(
    ("status", "not_found", "conflict"),
    [(404, True, False), (409, False, True), (500, False, False), (0, False, False)],
)
def test_the_error_says_what_the_callers_tell_apart(
    status: int, not_found: bool, conflict: bool
) -> None:
    error = ApiError(status, "Reason", "message")
    assert (error.not_found, error.conflict) == (not_found, conflict)
    assert str(error) == f"{status} Reason: message"


def test_the_error_finds_a_cause_in_the_status_details() -> None:
    # As the API server serializes a StatusCause: its Type under the key "reason".
    body = {"details": {"causes": [{"reason": "FieldValueInvalid", "field": "spec"}, "junk"]}}
    error = ApiError(422, "Invalid", "bad", body)
    assert error.has_cause("FieldValueInvalid")
    assert not error.has_cause("FieldValueRequired")
    assert not ApiError(422, "Invalid", "bad", {"details": "junk"}).has_cause("FieldValueInvalid")
    assert not ApiError(
        422, "Invalid", "bad", {"details": {"causes": [{"type": "FieldValueInvalid"}]}}
    ).has_cause("FieldValueInvalid")
