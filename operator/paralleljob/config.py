"""Operator settings from the command line and the environment."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace
from typing import TypeVar

from .controller import ControllerConfig
from .core import CoreConfig

LOG_LEVELS = ("debug", "info", "warning", "error")


N = TypeVar("N", int, float)


def port_from_env(name: str, default: int) -> int:
    """A port number from environment variable ``name`` (``default`` if unset or blank)."""
    return _env(name, default, minimum=0)


def _env(name: str, default: N, *, minimum: N) -> N:
    """The number in environment variable ``name`` (``default`` if unset or blank),
    parsed as ``default``'s type (int or float seconds), at least ``minimum``."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    kind = type(default)
    try:
        value = kind(raw)
    except ValueError as exc:
        what = "an integer" if kind is int else "a number of seconds"
        raise ValueError(f"{name} must be {what}, got {raw!r}") from exc
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum:g}, got {raw!r}")
    return value


@dataclass(frozen=True)
class ApiConfig:
    """How the operator's API client paces itself."""

    #: Requests in flight at most.
    concurrency: int = 64
    #: Client-side rate limit (client-go's token bucket), requests per second; 0: none.
    qps: float = 0.0
    #: Requests that may go at once after a quiet spell (client-go's burst).
    burst: int = 1


@dataclass(frozen=True)
class OperatorConfig:
    namespaces: tuple[str, ...] = ()
    log_level: str = "info"
    liveness_port: int = 8080
    metrics_port: int = 8081
    controller: ControllerConfig = field(default_factory=ControllerConfig)
    api: ApiConfig = field(default_factory=ApiConfig)


def controller_config_from_env() -> ControllerConfig:
    """The tuning knobs, all optional (see docs/operations.md); each default is
    the dataclass field's."""
    core, loop = CoreConfig(), ControllerConfig()
    return ControllerConfig(
        core=replace(
            core,
            backoff_base_seconds=_env(
                "PJ_POD_BACKOFF_BASE_SECONDS", core.backoff_base_seconds, minimum=0.0
            ),
            backoff_max_seconds=_env(
                "PJ_POD_BACKOFF_MAX_SECONDS", core.backoff_max_seconds, minimum=0.0
            ),
        ),
        sync_batch_seconds=_env("PJ_SYNC_BATCH_SECONDS", loop.sync_batch_seconds, minimum=0.0),
        duration_refresh_qps=_env(
            "PJ_DURATION_REFRESH_QPS", loop.duration_refresh_qps, minimum=0.0
        ),
        status_batch_seconds=_env(
            "PJ_STATUS_BATCH_SECONDS", loop.status_batch_seconds, minimum=0.0
        ),
        stall_seconds=_env("PJ_LIVENESS_STALL_SECONDS", loop.stall_seconds, minimum=1.0),
    )


def api_config_from_env() -> ApiConfig:
    defaults = ApiConfig()
    qps = _env("PJ_API_QPS", defaults.qps, minimum=0.0)
    return ApiConfig(
        concurrency=_env("PJ_API_CONCURRENCY", defaults.concurrency, minimum=1),
        qps=qps,
        burst=_env("PJ_API_BURST", max(1, math.ceil(qps)), minimum=1),
    )
