"""``paralleljob-operator``: run the ParallelJob operator.

Checks before it starts that the API server answers, that the ParallelJob CRD is
installed, that every namespace it is told to watch exists and (with leader election)
that the Lease's namespace exists and its Lease can be read; any of these failing prints
one line to stderr and exits with status 1. With leader election (the default, as
kube-controller-manager's ``--leader-elect``) it stands by until it holds the Lease
(election/standby.py) and exits with status 1 when it loses it. A standby lists and watches the
pods and which jobs exist while it stands by (runtime/caches.py), so that it takes over with
its caches in sync.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import re
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from . import constants as c
from .config import (
    LOG_LEVELS,
    MANAGE_JOBS_OFF,
    LeaderElectionConfig,
    OperatorConfig,
    api_config_from_env,
    bind_address,
    bind_address_from_env,
    controller_config_from_env,
    leader_election_config_from_env,
    listen_url,
    manage_jobs,
    port_from_env,
)
from .election.fence import WriteFence
from .election.fence_object import FenceObject
from .election.lease_lock import lease_path
from .election.standby import run_elected
from .runtime.kube import ApiError, ConfigError, Kube, load_configuration
from .version import version

PROG = "paralleljob-operator"
DEFAULTS = OperatorConfig()


class StartupError(Exception):
    """Something the operator cannot run without; the message is one line."""


def parse_args(argv: Sequence[str] | None = None) -> OperatorConfig:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.log_level not in LOG_LEVELS:
        parser.error(f"--log-level must be one of {', '.join(LOG_LEVELS)}")
    try:
        return OperatorConfig(
            namespaces=_namespaces(args.namespace),
            log_level=args.log_level,
            manage_jobs=manage_jobs(
                args.manage_jobs or os.environ.get("PJ_MANAGE_JOBS") or DEFAULTS.manage_jobs,
                "--manage-jobs" if args.manage_jobs else "PJ_MANAGE_JOBS",
            ),
            bind_address=(
                bind_address(args.bind_address, "--bind-address")
                if args.bind_address is not None
                else bind_address_from_env("PJ_BIND_ADDRESS", DEFAULTS.bind_address)
            ),
            liveness_port=_port(args.liveness_port, "PJ_LIVENESS_PORT", DEFAULTS.liveness_port),
            metrics_port=_port(args.metrics_port, "PJ_METRICS_PORT", DEFAULTS.metrics_port),
            controller=controller_config_from_env(),
            api=api_config_from_env(),
            leader_election=leader_election_config_from_env(args.leader_elect),
        )
    except ValueError as exc:
        parser.error(str(exc))


def _namespaces(flags: Sequence[str]) -> tuple[str, ...]:
    """The namespaces to watch: the flags, else $PJ_WATCH_NAMESPACES (comma list);
    none: all of them."""
    namespaces = [n for n in flags if n]
    if not namespaces:
        env = os.environ.get("PJ_WATCH_NAMESPACES", "")
        namespaces = [n.strip() for n in env.split(",") if n.strip()]
    return tuple(dict.fromkeys(namespaces))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Run the ParallelJob operator (the batch/v1 Job controller as a CRD).",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {version()}")
    parser.add_argument(
        "--namespace",
        "-n",
        action="append",
        default=[],
        metavar="NS",
        help="watch only this namespace (repeatable); default: all namespaces, "
        "or the comma-separated list in $PJ_WATCH_NAMESPACES",
    )
    parser.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        type=str.lower,
        default=(os.environ.get("PJ_LOG_LEVEL") or DEFAULTS.log_level).lower(),
        help=f"debug, info, warning or error (default: $PJ_LOG_LEVEL or {DEFAULTS.log_level})",
    )
    parser.add_argument(
        "--manage-jobs",
        metavar="MODE",
        help="which batch/v1 Jobs to reconcile besides every ParallelJob: managed-by (those "
        f"whose spec.managedBy is {c.MANAGED_BY}), all (also those naming no controller or "
        "the built-in: for a cluster without kube-controller-manager's job controller) or "
        f"off (default: $PJ_MANAGE_JOBS, else {DEFAULTS.manage_jobs})",
    )
    parser.add_argument(
        "--bind-address",
        metavar="ADDRESS",
        help="the IP address to serve the liveness probe and the metrics on "
        f"(default: $PJ_BIND_ADDRESS, else {DEFAULTS.bind_address}, every IPv4 interface; "
        ":: for every IPv6 one)",
    )
    parser.add_argument(
        "--liveness-port",
        type=int,
        metavar="PORT",
        help="serve kopf's liveness probe on http://ADDRESS:PORT/healthz "
        f"(default {DEFAULTS.liveness_port} or $PJ_LIVENESS_PORT; 0 disables it)",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve Prometheus metrics on http://ADDRESS:PORT/metrics "
        f"(default {DEFAULTS.metrics_port} or $PJ_METRICS_PORT; 0 disables them)",
    )
    parser.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="act only while holding the leader-election Lease, so that several replicas "
        "can run (default: $PJ_LEADER_ELECT, else "
        f"{str(DEFAULTS.leader_election.enabled).lower()})",
    )
    return parser


def liveness_endpoint(config: OperatorConfig) -> str | None:
    """kopf's liveness endpoint (kopf listens on the URL's host and port), None when off."""
    if config.liveness_port <= 0:
        return None
    return listen_url(config.bind_address, config.liveness_port, "/healthz")


def _port(flag: int | None, env: str, default: int) -> int:
    """The flag's port, else the environment's, else the default."""
    return flag if flag is not None else port_from_env(env, default)


async def preflight(config: OperatorConfig) -> None:
    """Fails fast, with a one-line reason, when the operator could not work."""
    try:
        configuration = await load_configuration()
    except ConfigError as exc:
        raise StartupError(str(exc)) from exc
    except Exception as exc:
        raise StartupError(f"no usable kubeconfig or in-cluster configuration: {exc}") from exc
    kube = Kube(configuration, concurrency=4)
    try:
        try:
            version = await kube.request("GET", "/version", timeout=15)
        except ApiError as exc:
            if exc.status == 0:
                raise StartupError(
                    f"cannot reach the API server at {kube.host}: {exc.message}"
                ) from exc
            raise StartupError(f"the API server at {kube.host} refused: {exc}") from exc
        check_kubernetes_version(version)
        try:
            await kube.request("GET", f"/apis/{c.GROUP}/{c.VERSION}", timeout=15)
        except ApiError as exc:
            if exc.not_found:
                raise StartupError(
                    f"the ParallelJob CRD ({c.PLURAL}.{c.GROUP}/{c.VERSION}) is not installed: "
                    "kubectl apply -f crds/"
                ) from exc
            raise StartupError(f"cannot look up the ParallelJob API: {exc}") from exc
        if config.manage_jobs != MANAGE_JOBS_OFF:
            await _check_jobs(kube, config)
        for namespace in config.namespaces:
            try:
                await kube.request("GET", f"/api/v1/namespaces/{namespace}", timeout=15)
            except ApiError as exc:
                if exc.not_found:
                    raise StartupError(f"namespace {namespace!r} does not exist") from exc
                raise StartupError(f"cannot look up namespace {namespace!r}: {exc}") from exc
        if config.leader_election.enabled:
            await _check_lease(kube, config.leader_election)
        elif os.environ.get("POD_NAME"):
            await _clear_fence(kube, config.leader_election)
    finally:
        await kube.close()


#: The oldest Kubernetes minor the operator runs against (docs/operations.md): the
#: batch/v1 it implements is 1.37's, and 1.35 is the oldest minor upstream supports.
OLDEST_SUPPORTED_MINOR = 35


def kubernetes_minor(version: Mapping[str, Any]) -> tuple[int, int] | None:
    """/version's major and minor (a provider's minor may read "35+"); None when they
    are not numbers."""
    major = re.match(r"\d+", str(version.get("major") or ""))
    minor = re.match(r"\d+", str(version.get("minor") or ""))
    if major is None or minor is None:
        return None
    return int(major.group()), int(minor.group())


def check_kubernetes_version(version: Mapping[str, Any]) -> None:
    """Refuses an API server older than OLDEST_SUPPORTED_MINOR (one that does not say
    is given the benefit of the doubt)."""
    found = kubernetes_minor(version)
    if found is not None and found < (1, OLDEST_SUPPORTED_MINOR):
        named = version.get("gitVersion") or f"{found[0]}.{found[1]}"
        raise StartupError(
            f"the API server runs Kubernetes {named}; "
            f"the operator needs 1.{OLDEST_SUPPORTED_MINOR} or later (docs/operations.md)"
        )


async def _check_jobs(kube: Kube, config: OperatorConfig) -> None:
    """The operator may list batch/v1 Jobs where it watches (else kopf would retry the
    watch forever, and no Job would ever run)."""
    scope = config.namespaces[:1]
    path = f"/apis/batch/v1/namespaces/{scope[0]}/jobs" if scope else "/apis/batch/v1/jobs"
    try:
        await kube.request("GET", path, query=[("limit", "1")], timeout=15)
    except ApiError as exc:
        raise StartupError(
            f"cannot list batch/v1 Jobs ({exc}), which PJ_MANAGE_JOBS={config.manage_jobs} "
            "needs: grant the operator's RBAC rule for jobs (manifests/rbac.yaml), or set "
            "PJ_MANAGE_JOBS=off"
        ) from exc


async def _check_lease(kube: Kube, election: LeaderElectionConfig) -> None:
    """The Lease's namespace exists and the Lease can be read (or does not exist yet)."""
    namespace, name = election.namespace, election.lease_name
    try:
        await kube.request("GET", f"/api/v1/namespaces/{namespace}", timeout=15)
    except ApiError as exc:
        if exc.not_found:
            raise StartupError(
                f"namespace {namespace!r} of the leader-election lease does not exist "
                "(set PJ_LEADER_ELECTION_NAMESPACE, or PJ_LEADER_ELECT=false to run alone)"
            ) from exc
        raise StartupError(f"cannot look up namespace {namespace!r}: {exc}") from exc
    try:
        await kube.request("GET", lease_path(namespace, name), timeout=15)
    except ApiError as exc:
        if not exc.not_found:
            raise StartupError(f"cannot read lease {namespace}/{name}: {exc}") from exc


async def _clear_fence(kube: Kube, election: LeaderElectionConfig) -> None:
    """Alone in a pod (no leader election): no Fence, or the API server would refuse this
    pod's writes for not being the leader an earlier deploy named there
    (election/fence_object.py). Outside a pod nothing is judged: no token names a pod."""
    fence = FenceObject(kube, election.namespace, election.lease_name)
    try:
        await fence.delete()
    except ApiError as exc:
        raise StartupError(f"cannot delete fence {fence.describe}: {exc}") from exc


def configure_logging(level: str) -> None:
    import kopf

    kopf.configure(debug=level == "debug", quiet=level in ("warning", "error"))
    logging.getLogger().setLevel(level.upper())
    if level != "debug":
        # kopf narrates every handler call at INFO; keep its warnings and errors.
        logging.getLogger("kopf").setLevel(
            max(logging.WARNING, logging.getLevelName(level.upper()))
        )


def main(argv: Sequence[str] | None = None) -> int:
    config = parse_args(argv)
    try:
        asyncio.run(preflight(config))
    except StartupError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    configure_logging(config.log_level)

    import kopf

    from . import handlers  # noqa: F401 (registers the handlers)
    from .runtime.caches import Caches

    # What is imported by now (kopf, aiohttp, the kubernetes client: some 60,000 objects)
    # lives as long as the process. Frozen, it is no longer walked by every full
    # collection of the cyclic GC, whose pauses stop the one event loop (measured with
    # 500 running jobs: the longest 311 -> 232 ms, their total 2.4 -> 1.8 s in 2.5 min).
    gc.collect()
    gc.freeze()

    log = logging.getLogger(PROG)
    scope = ", ".join(config.namespaces) if config.namespaces else "all namespaces"
    log.info("starting %s %s: watching %s", PROG, version(), scope)
    options: dict[str, Any] = {
        "standalone": True,
        "clusterwide": not config.namespaces,
        "namespaces": list(config.namespaces),
        "liveness_endpoint": liveness_endpoint(config),
        "memo": kopf.Memo(config=config),
    }
    if not config.leader_election.enabled:
        kopf.run(**options)
        return 0

    async def lead(stop: asyncio.Event) -> None:
        await kopf.operator(**options, stop_flag=stop)

    async def stand_by_warm() -> int:
        # Shut until the elector's first renewal opens it: no write leaves the process
        # unless its own clock says it holds the Lease (election/fence.py).
        fence = WriteFence()
        caches = await Caches.open(config, fence)
        caches.start()
        options["memo"].caches = caches  # kopf's startup attaches the controllers
        try:
            return await run_elected(config, lead, warm=caches.synced.jobs.is_set, fence=fence)
        finally:
            await caches.close()

    return asyncio.run(stand_by_warm())


if __name__ == "__main__":
    sys.exit(main())
