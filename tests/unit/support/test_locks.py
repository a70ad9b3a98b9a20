"""shared_use: what two workers' module fixtures do with one installed component."""

from __future__ import annotations

import uuid
from contextlib import ExitStack

import pytest

from tests.support.locks import shared_use


@pytest.fixture(autouse=True)
def _own_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", uuid.uuid4().hex)


def test_the_first_user_installs_and_the_last_removes_while_others_still_use_it() -> None:
    calls: list[str] = []

    def install() -> bool:
        calls.append("install")
        return True

    with ExitStack() as first:
        first.enter_context(shared_use("thing", install, lambda: calls.append("remove")))
        with shared_use("thing", install, lambda: calls.append("remove")):
            assert calls == ["install"]
        # The second user left first: the first one's test still runs on it.
        assert calls == ["install"]
    assert calls == ["install", "remove"]


def test_what_was_there_before_is_left_in_place() -> None:
    calls: list[str] = []
    with shared_use("thing", lambda: False, lambda: calls.append("remove")):
        pass
    assert calls == []


def test_a_later_user_installs_again_after_the_last_one_removed_it() -> None:
    calls: list[str] = []

    def install() -> bool:
        calls.append("install")
        return True

    for _ in range(2):
        with shared_use("thing", install, lambda: calls.append("remove")):
            pass
    assert calls == ["install", "remove", "install", "remove"]


def test_a_failed_install_counts_no_user() -> None:
    def fail() -> bool:
        raise RuntimeError("install failed")

    with pytest.raises(RuntimeError), shared_use("thing", fail, lambda: None):
        pass
    installs: list[str] = []

    def install() -> bool:
        installs.append("install")
        return True

    with shared_use("thing", install, lambda: None):
        pass
    assert installs == ["install"]
