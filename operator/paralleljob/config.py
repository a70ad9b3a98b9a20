"""Every operator setting and its default, defined once, and how the command line and
the environment set them. A leaf: it imports nothing of the package's but leaves, so the
core and the shell both read their settings from here (tests/unit/test_layers.py)."""

from __future__ import annotations

import ipaddress
import math
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

LOG_LEVELS = ("debug", "info", "warning", "error")

#: Where a pod finds its own namespace (client-go's in-cluster config reads it too).
SERVICE_ACCOUNT_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
#: client-go's JitterFactor: a standby waits 1 to 2.2 retry periods between attempts.
JITTER_FACTOR = 1.2

_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


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


def _env_bool(name: str, default: bool) -> bool:
    """``true`` or ``false`` in environment variable ``name`` (``default`` if unset)."""
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw not in ("true", "false"):
        raise ValueError(f"{name} must be true or false, got {raw!r}")
    return raw == "true"


def bind_address(raw: str, name: str) -> str:
    """The IP address in ``raw`` (setting ``name``), normalised (``::0`` is ``::``):
    what kube-controller-manager's ``--bind-address`` takes, no host name."""
    try:
        return str(ipaddress.ip_address(raw.strip()))
    except ValueError:
        raise ValueError(f"{name} must be an IP address, got {raw!r}") from None


def bind_address_from_env(name: str, default: str) -> str:
    """An IP address from environment variable ``name`` (``default`` if unset or blank)."""
    raw = os.environ.get(name, "")
    return bind_address(raw, name) if raw.strip() else default


def listen_url(address: str, port: int, path: str) -> str:
    """``http://ADDRESS:PORT/PATH``, an IPv6 address in brackets."""
    host = f"[{address}]" if ":" in address else address
    return f"http://{host}:{port}{path}"


@dataclass(frozen=True)
class CoreConfig:
    """What the pure core is tuned by: upstream's job controller constants."""

    #: The pod-failure back-off's base (DefaultJobPodFailureBackOff, 10 s;
    #: ``PJ_POD_BACKOFF_BASE_SECONDS``) and cap (MaxJobPodFailureBackOff, 10 minutes;
    #: ``PJ_POD_BACKOFF_MAX_SECONDS``).
    backoff_base_seconds: float = 10.0
    backoff_max_seconds: float = 600.0
    #: MaxPodCreateDeletePerSync upstream.
    max_pod_changes_per_sync: int = 500
    #: MaxUncountedPods upstream.
    max_uncounted: int = 500


@dataclass(frozen=True)
class ControllerConfig:
    """What the shell's per-job loops and writes are tuned by."""

    core: CoreConfig = field(default_factory=CoreConfig)
    #: Event-driven syncs of one job start at least this far apart, so that a burst
    #: of pod events makes one sync (upstream batches pod events for 1s;
    #: ``PJ_SYNC_BATCH_SECONDS``).
    sync_batch_seconds: float = 0.1
    #: Jobs synced at once, by as many workers of one work queue (upstream's
    #: ``--concurrent-job-syncs``, 5 there; ``PJ_CONCURRENT_JOB_SYNCS``). A worker spends
    #: a sync waiting for API answers, and at most ``concurrent_creating_syncs`` of them
    #: create pods: more workers than upstream's keep a finished pod's status write from
    #: queueing behind other jobs' writes when the API server is slow.
    concurrent_syncs: int = 20
    #: Of those, the syncs creating pods at once (``PJ_CONCURRENT_CREATING_SYNCS``): more
    #: workers then speed up the other writes (a finished pod's status) without sending
    #: more new pods at once than this many syncs' slow starts.
    concurrent_creating_syncs: int = 5
    #: Retry delays after a failed API call (upstream's job work queue: 1s .. 1min).
    retry_base_seconds: float = 1.0
    retry_max_seconds: float = 60.0
    #: The liveness probe fails when a job loop's work has been pending this long
    #: (``PJ_LIVENESS_STALL_SECONDS``): below the 5-minute expectations timeout, so that
    #: an unobserved pod change is reported before the loop gives up waiting for it.
    stall_seconds: float = 180.0
    #: Whether Kueue's configuration turns waitForPodsReady on
    #: (``PJ_KUEUE_WAIT_FOR_PODS_READY``): then a queued ParallelJob's Workload gets the
    #: PodsReady condition, as Kueue's Job integration writes it only then.
    kueue_wait_for_pods_ready: bool = False
    #: Budget of status writes per second, over all jobs, that only refresh the printed
    #: DURATION of running jobs (``PJ_DURATION_REFRESH_QPS``; 0: never refresh DURATION
    #: on its own; it is then written with the job's other changes only).
    duration_refresh_qps: float = 5.0
    #: A status write that only reports a running job's progress waits until this long
    #: after the job's last status write (``PJ_STATUS_BATCH_SECONDS``, upstream's
    #: podUpdateBatchPeriod; see status_batch.py; 0: never waits).
    status_batch_seconds: float = 1.0
    #: Budget of status writes per second, over all jobs, that only report progress
    #: (``PJ_PROGRESS_WRITE_QPS``; see status_batch.py; 0: no budget, each job writes
    #: once per batch period).
    progress_write_qps: float = 10.0


@dataclass(frozen=True)
class ApiConfig:
    """How the operator's API client paces itself."""

    #: Requests in flight at most.
    concurrency: int = 64
    #: Client-side rate limit (client-go's token bucket), requests per second; 0: none.
    qps: float = 0.0
    #: Requests that may go at once after a quiet spell (client-go's burst).
    burst: int = 1


def bool_from_env(name: str, default: bool) -> bool:
    """true/false (also 1/0, yes/no, on/off) from environment variable ``name``
    (``default`` if unset or blank)."""
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in _TRUE or raw in _FALSE:
        return raw in _TRUE
    raise ValueError(f"{name} must be true or false, got {os.environ[name]!r}")


@dataclass(frozen=True)
class LeaderElectionConfig:
    """client-go's leader election (``tools/leaderelection``), on by default as
    kube-controller-manager's ``--leader-elect``, with shorter timings than its 15 s
    lease, 10 s renew deadline and 2 s retry period, so that a standby takes over from a
    killed leader in under 15 s: a 9 s lease, a 6 s renew deadline, a 1 s retry period
    (the leader gives up at most 7 s after its last renewal, 2 s before a standby may
    take over)."""

    #: Take part in an election on a Lease (``PJ_LEADER_ELECT``); off: act at once, alone.
    enabled: bool = True
    #: The Lease's namespace: the operator's own (``$POD_NAMESPACE``, else the service
    #: account's), else this.
    namespace: str = "paralleljob-system"
    lease_name: str = "paralleljob-operator"
    #: This candidate's name in the Lease: the pod's name, else ``hostname_pid``.
    identity: str = ""
    #: How long a standby waits, after it last saw the Lease change, before taking it
    #: over (whole seconds: the Lease stores ``leaseDurationSeconds``).
    lease_duration_seconds: int = 9
    #: How long the leader keeps trying to renew before it gives up (and exits).
    renew_deadline_seconds: float = 6.0
    #: How often the leader renews, and a standby retries (jittered by JITTER_FACTOR).
    retry_period_seconds: float = 1.0


#: PJ_MANAGE_JOBS: which batch/v1 Jobs the operator reconciles, besides every ParallelJob.
#: ``managed-by``: those whose spec.managedBy names it; ``all``: also those naming no
#: controller or the built-in (a cluster whose kube-controller-manager runs without its
#: job controller); ``off``: none.
MANAGE_JOBS_OFF = "off"
MANAGE_JOBS_MANAGED_BY = "managed-by"
MANAGE_JOBS_ALL = "all"
MANAGE_JOBS_MODES = (MANAGE_JOBS_OFF, MANAGE_JOBS_MANAGED_BY, MANAGE_JOBS_ALL)


def manage_jobs(raw: str, name: str) -> str:
    """A PJ_MANAGE_JOBS value, or a ValueError that names the setting and its values."""
    value = raw.strip().lower()
    if value not in MANAGE_JOBS_MODES:
        raise ValueError(f"{name} must be one of {', '.join(MANAGE_JOBS_MODES)}, not {raw!r}")
    return value


@dataclass(frozen=True)
class OperatorConfig:
    namespaces: tuple[str, ...] = ()
    log_level: str = "info"
    #: Which batch/v1 Jobs the operator reconciles (``--manage-jobs``, PJ_MANAGE_JOBS).
    manage_jobs: str = MANAGE_JOBS_MANAGED_BY
    #: The IP address the liveness probe and the metrics listen on (``--bind-address``,
    #: as kube-controller-manager's): 0.0.0.0 is every IPv4 interface, :: every IPv6 one.
    bind_address: str = "0.0.0.0"
    liveness_port: int = 8080
    metrics_port: int = 8081
    controller: ControllerConfig = field(default_factory=ControllerConfig)
    api: ApiConfig = field(default_factory=ApiConfig)
    leader_election: LeaderElectionConfig = field(default_factory=LeaderElectionConfig)


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
        concurrent_syncs=_env("PJ_CONCURRENT_JOB_SYNCS", loop.concurrent_syncs, minimum=1),
        concurrent_creating_syncs=_env(
            "PJ_CONCURRENT_CREATING_SYNCS", loop.concurrent_creating_syncs, minimum=1
        ),
        duration_refresh_qps=_env(
            "PJ_DURATION_REFRESH_QPS", loop.duration_refresh_qps, minimum=0.0
        ),
        status_batch_seconds=_env(
            "PJ_STATUS_BATCH_SECONDS", loop.status_batch_seconds, minimum=0.0
        ),
        progress_write_qps=_env("PJ_PROGRESS_WRITE_QPS", loop.progress_write_qps, minimum=0.0),
        stall_seconds=_env("PJ_LIVENESS_STALL_SECONDS", loop.stall_seconds, minimum=1.0),
        kueue_wait_for_pods_ready=_env_bool(
            "PJ_KUEUE_WAIT_FOR_PODS_READY", loop.kueue_wait_for_pods_ready
        ),
    )


def api_config_from_env() -> ApiConfig:
    defaults = ApiConfig()
    qps = _env("PJ_API_QPS", defaults.qps, minimum=0.0)
    return ApiConfig(
        concurrency=_env("PJ_API_CONCURRENCY", defaults.concurrency, minimum=1),
        qps=qps,
        burst=_env("PJ_API_BURST", max(1, math.ceil(qps)), minimum=1),
    )


def own_identity(environ: Mapping[str, str], hostname: str, pid: int) -> str:
    """The candidate's identity: the pod's name (``$POD_NAME``, from the downward API),
    else ``hostname_pid``."""
    return environ.get("POD_NAME", "").strip() or f"{hostname}_{pid}"


def own_namespace(environ: Mapping[str, str], service_account_namespace: str | None) -> str:
    """The operator's namespace: ``$POD_NAMESPACE`` (downward API), else the service
    account's, else "" (unknown: not in a pod)."""
    return environ.get("POD_NAMESPACE", "").strip() or (service_account_namespace or "").strip()


def _str_env(name: str) -> str:
    return os.environ.get(name, "").strip()


def _read_service_account_namespace() -> str | None:
    try:
        return SERVICE_ACCOUNT_NAMESPACE_FILE.read_text()
    except OSError:
        return None


def check_leader_election(config: LeaderElectionConfig) -> None:
    """client-go's NewLeaderElector checks: the lease outlives the renew deadline, which
    leaves room for a jittered retry. Raises ValueError naming the settings."""
    if config.lease_duration_seconds <= config.renew_deadline_seconds:
        raise ValueError(
            "PJ_LEADER_ELECTION_LEASE_DURATION_SECONDS "
            f"({config.lease_duration_seconds:g}) must be greater than "
            f"PJ_LEADER_ELECTION_RENEW_DEADLINE_SECONDS ({config.renew_deadline_seconds:g})"
        )
    if config.renew_deadline_seconds <= JITTER_FACTOR * config.retry_period_seconds:
        raise ValueError(
            "PJ_LEADER_ELECTION_RENEW_DEADLINE_SECONDS "
            f"({config.renew_deadline_seconds:g}) must be greater than {JITTER_FACTOR:g} x "
            f"PJ_LEADER_ELECTION_RETRY_PERIOD_SECONDS ({config.retry_period_seconds:g})"
        )


def leader_election_config_from_env(enabled: bool | None = None) -> LeaderElectionConfig:
    """The election's settings (``enabled``: the command line's choice, if any), the
    identity and the Lease's namespace; each default is the dataclass field's."""
    defaults = LeaderElectionConfig()
    if enabled is None:
        enabled = bool_from_env("PJ_LEADER_ELECT", defaults.enabled)
    pod_namespace = own_namespace(os.environ, _read_service_account_namespace())
    config = LeaderElectionConfig(
        enabled=enabled,
        namespace=_str_env("PJ_LEADER_ELECTION_NAMESPACE") or pod_namespace or defaults.namespace,
        lease_name=_str_env("PJ_LEADER_ELECTION_LEASE_NAME") or defaults.lease_name,
        identity=own_identity(os.environ, socket.gethostname(), os.getpid()),
        lease_duration_seconds=_env(
            "PJ_LEADER_ELECTION_LEASE_DURATION_SECONDS",
            defaults.lease_duration_seconds,
            minimum=1,
        ),
        renew_deadline_seconds=_env(
            "PJ_LEADER_ELECTION_RENEW_DEADLINE_SECONDS",
            defaults.renew_deadline_seconds,
            minimum=0.1,
        ),
        retry_period_seconds=_env(
            "PJ_LEADER_ELECTION_RETRY_PERIOD_SECONDS",
            defaults.retry_period_seconds,
            minimum=0.1,
        ),
    )
    check_leader_election(config)
    return config
