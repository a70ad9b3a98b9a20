"""The chaos suite (issue 9, part 4) reuses the e2e fixtures: the CRD, a namespace, the
operator as a subprocess that tests can SIGKILL or freeze. Each test reports how long
the operator took to recover; the times are printed at the end of the run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.conftest import crd, operator, operator_settings, pair  # noqa: F401 (fixtures)
from tests.e2e.support import Kubectl

RECOVERY: list[tuple[str, float]] = []


@pytest.fixture
def k(namespace: str) -> Kubectl:
    return Kubectl(namespace)


@pytest.fixture
def recovery(request: pytest.FixtureRequest) -> Iterator[list[float]]:
    """Recovery times (seconds) the test measured, reported under its name."""
    times: list[float] = []
    yield times
    RECOVERY.extend((request.node.name, t) for t in times)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not RECOVERY:
        return
    terminalreporter.section("chaos: recovery times")
    for name, seconds in RECOVERY:
        terminalreporter.write_line(f"{name}: {seconds:.1f} s")
