"""The operator's connections to the API server: its watches never take the connections
its requests need, whatever PJ_API_CONCURRENCY and however many namespaces it watches (a
watch holds its connection for minutes; in one pool of PJ_API_CONCURRENCY, three watches
per namespace left every request waiting until its timeout: no pod at all)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.wait import wait_until

from .conftest import Operator, operator_env, running
from .support import Kubectl, kubectl, kwok_template

pytestmark = [pytest.mark.kwok]

#: Watched namespaces: with three watches each (ParallelJobs, their pods,
#: ParallelCronJobs), ninety watches on two request connections.
NAMESPACES = 30


@pytest.fixture
def namespaces(namespace: str) -> Iterator[tuple[str, ...]]:
    """The test's namespace and NAMESPACES - 1 more of its own, deleted afterwards."""
    more = tuple(f"{namespace}-{i}" for i in range(1, NAMESPACES))
    for name in more:
        kubectl("create", "namespace", name)
    try:
        yield (namespace, *more)
    finally:
        kubectl("delete", "namespace", *more, "--wait=false", check=False)


@pytest.fixture
def starved_operator(
    request: pytest.FixtureRequest, crd: None, namespaces: tuple[str, ...], tmp_path: Path
) -> Iterator[Operator]:
    """One operator for every namespace, two requests at a time."""
    first, *more = namespaces
    env = operator_env(PJ_API_CONCURRENCY="2")
    yield from running(Operator(first, tmp_path, env, tuple(more)), first, request)


def test_two_concurrent_requests_and_thirty_namespaces_run_every_job(
    starved_operator: Operator, namespaces: tuple[str, ...]
) -> None:
    for ns in namespaces:
        Kubectl(ns).create_pj("one", kwok_template("1s"), completions=2, parallelism=2)

    left = list(namespaces)

    def all_complete() -> bool:
        left[:] = [ns for ns in left if Kubectl(ns).finished("one") != "Complete"]
        return not left

    wait_until(
        all_complete,
        timeout=180,
        what=f"the job in each of {NAMESPACES} namespaces to complete",
    )
    assert left == []
