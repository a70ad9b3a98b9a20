"""Fixtures of the fuzz tests: the e2e tests' operator subprocess (one per test, watching
the test's namespace), with the settings bad input needs, and the fuzz run's size and
seed (``FUZZ_EXAMPLES``, ``FUZZ_SEED``; derandomized in CI)."""

from __future__ import annotations

import contextlib
import os
import random
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

# The e2e fixtures and the hook that tells the operator fixture a test failed (it then
# prints the operator's log).
from tests.e2e.conftest import (  # noqa: F401
    crd,
    k,
    operator,
    pytest_runtest_makereport,
)
from tests.e2e.support import kubectl
from tests.support.wait import wait_until

from .support import JobApi

#: Enough for every kind of input in a few minutes on 2 cores; FUZZ_EXAMPLES for more.
DEFAULT_EXAMPLES = 40

#: Failing kwok pods are replaced after 0.05 s x 2^n rather than 10 s x 2^n, so that a
#: job whose pods fail reaches backoffLimit within seconds. The operator runs alone on
#: its test namespace: no leader election.
OPERATOR_SETTINGS = {"PJ_POD_BACKOFF_BASE_SECONDS": "0.05", "PJ_LEADER_ELECT": "false"}


def fuzz_examples() -> int:
    return int(os.environ.get("FUZZ_EXAMPLES") or DEFAULT_EXAMPLES)


def derandomized() -> bool:
    """In CI a fuzz run is the same run every time: a failure there reproduces anywhere."""
    return os.environ.get("CI", "").lower() in ("1", "true")


def _seed() -> int:
    return int(os.environ.get("FUZZ_SEED") or random.randrange(2**32))


#: This session's seed (printed in the header and with a failing example).
FUZZ_SEED = _seed()


def pytest_report_header(config: pytest.Config) -> str:
    seed = "derandomized (CI)" if derandomized() else f"seed {FUZZ_SEED} (FUZZ_SEED={FUZZ_SEED})"
    return f"fuzz: {fuzz_examples()} examples (FUZZ_EXAMPLES), {seed}"


@pytest.fixture
def operator_settings(request: pytest.FixtureRequest) -> dict[str, str]:
    """OPERATOR_SETTINGS, and a test's own by indirect parametrisation."""
    return {**OPERATOR_SETTINGS, **dict(getattr(request, "param", {}))}


@pytest.fixture(scope="session")
def objects(api_client: Any) -> Any:
    from kubernetes import client

    return client.CustomObjectsApi(api_client)


@pytest.fixture
def jobs(objects: Any, namespace: str, request: pytest.FixtureRequest) -> JobApi:
    """The test namespace's ParallelJobs (the CRD applied first)."""
    request.getfixturevalue("crd")
    return JobApi(objects, namespace)


@contextlib.contextmanager
def new_namespace() -> Iterator[str]:
    """A fresh namespace, as tests/conftest.py's ``namespace`` fixture makes one (ready
    once its default ServiceAccount exists), deleted afterwards if a test has not."""
    name = f"pj-test-{uuid.uuid4().hex[:8]}"
    kubectl("create", "namespace", name)
    kubectl("label", "namespace", name, "paralleljob.dev/test=true")
    wait_until(
        lambda: (
            kubectl("get", "serviceaccount", "default", "-n", name, check=False).returncode == 0
        ),
        timeout=60,
        what=f"default ServiceAccount in {name}",
    )
    try:
        yield name
    finally:
        kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)
