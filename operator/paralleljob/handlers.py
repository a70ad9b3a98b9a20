"""The kopf wiring: the operator's life, one controller per kind of job (core/job/kind.py):
ParallelJobs always, batch/v1 Jobs unless PJ_MANAGE_JOBS is off.

* ``startup`` -- builds a controller per kind from the settings in kopf's memo (parsed
  once by the CLI), attaches them to the caches (runtime/caches.py: the operator's own pod and
  job informers, started there unless a standby started them already) and serves the
  Prometheus metrics (metrics.py). The jobs' informers hand each job to its controller:
  the first sight of a job starts its sync loop (an asyncio task, not a kopf daemon: a
  daemon would need a finalizer on every job, and deleting a job must never wait for
  the operator), later ones wake it, its deletion stops it and releases its pods'
  finalizers. The ParallelCronJob controller (cron/cron_controller.py) subscribes to
  the same caches: the ParallelCronJob informer, and the ParallelJob informer for its
  jobs. Where Kueue is installed, the Kueue controller (kueue/kueue_controller.py)
  subscribes to the Kueue cache (runtime/kueue_cache.py): a ParallelJob labelled
  ``kueue.x-k8s.io/queue-name`` is queued as one Workload. kopf itself watches no
  resource (one watch per kind, runtime/caches.py says why).
* ``progress`` -- a probe: ``/healthz`` fails while a job loop has work pending for
  longer than ``PJ_LIVENESS_STALL_SECONDS`` (see progress.py).
* ``cleanup`` -- stops the loops, the metrics server and the caches.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any

import kopf
from aiohttp import web

from .config import OperatorConfig
from .core import PARALLELJOB
from .cron.cron_controller import CronController
from .jobs.controller import Controller
from .kueue.kueue_controller import KueueController
from .runtime import metrics
from .runtime.caches import Caches
from .runtime.events import EventRecorder
from .runtime.kube import load_configuration
from .runtime.progress import describe


class App:
    """What the handlers share, built at startup inside kopf's event loop."""

    #: A controller per kind of job, by kind name (JobKind.kind).
    controllers: dict[str, Controller]
    #: The ParallelCronJobs' controller.
    crons: CronController
    #: The queued ParallelJobs' Workloads' controller, where Kueue is installed.
    kueue: KueueController | None
    recorder: EventRecorder
    #: The pods and which jobs exist, and the operator's client (caches.kube).
    caches: Caches
    metrics_server: web.AppRunner | None
    loop_lag: asyncio.Task[None]


def _app(memo: Any) -> App:
    app: App = memo.app
    return app


@kopf.on.login()
async def login(**_: Any) -> kopf.ConnectionInfo:
    """kopf's own API connection is the operator client's (kube.load_configuration), so
    that both pick kubeconfig or service account by the same rule."""
    cfg = await load_configuration()
    header: str = await cfg.get_api_key_with_prefix("BearerToken") or ""
    parts = header.split(" ", 1)
    scheme, token = (parts[0], parts[1]) if len(parts) == 2 else (None, header or None)
    return kopf.ConnectionInfo(
        server=cfg.host,
        ca_path=cfg.ssl_ca_cert,
        insecure=not cfg.verify_ssl,
        username=cfg.username or None,
        password=cfg.password or None,
        scheme=scheme,
        token=token,
        certificate_path=cfg.cert_file,
        private_key_path=cfg.key_file,
        proxy_url=cfg.proxy,
    )


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: Any, **_: Any) -> None:
    """Builds a controller per kind once, and the informers that fill their pod cache."""
    config: OperatorConfig = getattr(memo, "config", None) or OperatorConfig()
    settings.posting.enabled = False  # the operator posts its own Events
    settings.execution.max_workers = 2  # nothing runs in threads
    caches: Caches | None = getattr(memo, "caches", None)
    if caches is None:  # no standby started them: the first to list
        caches = await Caches.open(config)
        caches.start()
    app = App()
    app.recorder = EventRecorder(caches.kube)
    app.caches = caches
    app.controllers = {
        kind.kind: Controller(
            caches.kube.for_kind(kind),
            app.recorder,
            config.controller,
            pods_of=caches.pods.pods_of,
            kind=kind,
            synced=caches.synced,
        )
        for kind in caches.kinds
    }
    app.crons = CronController(
        caches.kube.for_kind(PARALLELJOB),
        app.recorder,
        caches.cron_children,
        config.controller,
        leading_since=datetime.now(UTC),
        monotonic=time.monotonic,
        # No job is judged missing, nor created again, before every job is listed.
        ready=caches.synced.jobs,
    )
    app.kueue = (
        None
        if caches.kueue is None
        else KueueController(
            caches.kube.for_kind(PARALLELJOB),
            app.recorder,
            caches.kueue,
            config.controller,
            monotonic=time.monotonic,
            wait_for_pods_ready=config.controller.kueue_wait_for_pods_ready,
            # No job is judged gone before every job is listed.
            ready=caches.synced.jobs,
        )
    )
    await caches.attach(app.controllers, app.crons, app.kueue)
    metrics.track_state(list(app.controllers.values()))
    app.loop_lag = asyncio.create_task(metrics.sample_loop_lag(), name="event loop lag")
    app.metrics_server = (
        await metrics.serve(config.metrics_port, address=config.bind_address)
        if config.metrics_port > 0
        else None
    )
    memo.app = app


@kopf.on.cleanup()
async def cleanup(memo: Any, **_: Any) -> None:
    app = _app(memo)
    app.loop_lag.cancel()
    await app.crons.stop_all()
    if app.kueue is not None:
        await app.kueue.stop_all()
    await asyncio.gather(*(x.stop_all() for x in app.controllers.values()))
    if app.metrics_server is not None:
        await app.metrics_server.cleanup()
    await app.recorder.close()
    await app.caches.close()


@kopf.on.probe(id="progress")
async def progress(memo: Any, **_: Any) -> dict[str, int]:
    """Fails (so /healthz answers 500) while a job loop is not getting through its work."""
    app: App | None = getattr(memo, "app", None)
    if app is None:  # before startup
        return {"jobs": 0}
    now = time.monotonic()
    found = [stall for x in app.controllers.values() for stall in x.stalls(now)]
    if found:
        raise kopf.PermanentError(describe(found))
    return {"jobs": sum(len(x.jobs) for x in app.controllers.values())}
