"""Operator settings from the command line and the environment."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from .backoff import DEFAULT_BASE_SECONDS, DEFAULT_MAX_SECONDS
from .controller import ControllerConfig
from .core import CoreConfig
from .progress import DEFAULT_STALL_SECONDS

LOG_LEVELS = ("debug", "info", "warning", "error")


def _float_env(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError as exc:
        raise ValueError(f"{name} must be a number of seconds, got {raw!r}") from exc
    if value < 0:
        raise ValueError(f"{name} must not be negative, got {raw!r}")
    return value


def _int_env(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from exc
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {raw!r}")
    return value


@dataclass(frozen=True)
class OperatorConfig:
    namespaces: tuple[str, ...] = ()
    log_level: str = "info"
    liveness_port: int = 8080
    controller: ControllerConfig = field(default_factory=ControllerConfig)
    api_concurrency: int = 64


def controller_config_from_env() -> ControllerConfig:
    """The tuning knobs, all optional (see the README's CLI section)."""
    core = CoreConfig(
        backoff_base_seconds=_float_env("PJ_POD_BACKOFF_BASE_SECONDS", DEFAULT_BASE_SECONDS),
        backoff_max_seconds=_float_env("PJ_POD_BACKOFF_MAX_SECONDS", DEFAULT_MAX_SECONDS),
    )
    stall_seconds = _float_env("PJ_LIVENESS_STALL_SECONDS", DEFAULT_STALL_SECONDS)
    if stall_seconds <= 0:
        raise ValueError(f"PJ_LIVENESS_STALL_SECONDS must be positive, got {stall_seconds:g}")
    return ControllerConfig(
        core=core,
        sync_batch_seconds=_float_env("PJ_SYNC_BATCH_SECONDS", 0.1),
        stall_seconds=stall_seconds,
    )


def api_concurrency_from_env() -> int:
    return _int_env("PJ_API_CONCURRENCY", 64)
