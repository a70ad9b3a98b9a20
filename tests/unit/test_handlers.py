"""The kopf wiring (handlers.py): the liveness probe."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any, cast

import kopf
import pytest

from paralleljob import handlers
from paralleljob.config import ControllerConfig
from paralleljob.jobs.controller import Controller
from paralleljob.jobs.job_runtime import JobRuntime

from .fake_api import FakeApi, FakeRecorder

# kopf's decorators type handlers as its ActivityFn; call them as the plain coroutines.
progress_probe = cast(Callable[..., Coroutine[Any, Any, dict[str, int]]], handlers.progress)

JOB: dict[str, Any] = {
    "metadata": {"name": "j", "namespace": "ns", "uid": "u-1", "resourceVersion": "5"},
    "spec": {},
}


def _memo(config: ControllerConfig) -> tuple[kopf.Memo, Controller]:
    """The handlers' memo with one controller."""
    api = FakeApi(JOB)
    app = handlers.App()
    controller = Controller(api, FakeRecorder(), config, api.pods_of)
    app.controllers = {"ParallelJob": controller}
    return kopf.Memo(app=app), controller


def test_the_probe_fails_with_the_stalls_and_passes_otherwise() -> None:
    async def run() -> None:
        memo, controller = _memo(ControllerConfig(stall_seconds=60.0))
        assert await progress_probe(memo=memo) == {"jobs": 0}
        rt = JobRuntime(JOB)
        controller.jobs[rt.uid] = rt
        assert await progress_probe(memo=memo) == {"jobs": 1}
        rt.loop.sync_started = time.monotonic() - 61  # a sync that has hung for a minute
        with pytest.raises(kopf.PermanentError, match=r"no progress: ns/j: sync running for"):
            await progress_probe(memo=memo)

    asyncio.run(run())


def test_the_probe_passes_before_startup() -> None:
    result = asyncio.run(progress_probe(memo=kopf.Memo()))
    assert result == {"jobs": 0}
