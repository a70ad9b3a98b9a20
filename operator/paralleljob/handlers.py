"""The kopf wiring: thin handlers that feed the controllers, one per kind of job
(core/kind.py): ParallelJobs always, batch/v1 Jobs unless PJ_MANAGE_JOBS is off.

* ``paralleljob_event``, ``job_event`` -- the first event of a job starts its sync loop
  (an asyncio task, not a kopf daemon: a daemon would need a finalizer on every job,
  and deleting a job must never wait for the operator); later events wake it; DELETED
  stops it and releases its pods' finalizers. The Job handlers are registered only
  when Jobs are managed (:func:`watch_jobs`, called by the CLI).
* ``progress`` -- a probe: ``/healthz`` fails while a job loop has work pending for
  longer than ``PJ_LIVENESS_STALL_SECONDS`` (see progress.py).
* ``startup`` -- builds a controller per kind from the settings in kopf's memo (parsed
  once by the CLI), attaches them to the caches (caches.py: the operator's own pod and
  job informers, started there unless a standby started them already) and serves the
  Prometheus metrics (metrics.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from typing import Any

import kopf
from aiohttp import web

from .caches import Caches
from .config import OperatorConfig
from .core.kind import PARALLELJOB, batch_job
from .shell import metrics
from .shell.controller import Controller
from .shell.events import EventRecorder
from .shell.informer import PAGE_SIZE
from .shell.kube import load_configuration
from .shell.progress import describe

#: The batch/v1 Job as kopf watches it (the keys are the same for both settings of
#: batch_job).
_JOB = batch_job(take_unmanaged=False)


class App:
    """What the handlers share, built at startup inside kopf's event loop."""

    #: A controller per kind of job, by kind name (JobKind.kind).
    controllers: dict[str, Controller]
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


class NoDiffBase(kopf.DiffBaseStorage):
    """kopf's diff base, for an operator with event handlers and indexes only: kopf
    builds it (a deep copy of the object) and diffs it against the last handled one on
    every event, for change handlers, which this operator has none of. Nothing is
    built, fetched or stored: profiled under load, that was 6% of the operator's CPU."""

    def build(
        self, *, body: kopf.Body, extra_fields: Iterable[Any] | None = None
    ) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: Any, **_: Any) -> None:
    """Builds a controller per kind once, and the informers that fill their pod cache."""
    config: OperatorConfig = getattr(memo, "config", None) or OperatorConfig()
    settings.posting.enabled = False  # the operator posts its own Events
    settings.persistence.diffbase_storage = NoDiffBase()
    settings.watching.chunk_size = PAGE_SIZE  # the jobs' listing, in pages
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
    await caches.attach(app.controllers)
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
    await asyncio.gather(*(c.stop_all() for c in app.controllers.values()))
    if app.metrics_server is not None:
        await app.metrics_server.cleanup()
    await app.recorder.close()
    await app.caches.close()


async def _job_event(controller: Controller, event: kopf.RawEvent) -> None:
    """Every job event (and the initial listing) drives that job's loop."""
    obj = event.get("object")
    if not isinstance(obj, dict):
        return
    if event.get("type") == "DELETED":
        meta = obj.get("metadata", {})
        await controller.job_gone(str(meta.get("uid", "")))
        return
    controller.job_seen(obj)


@kopf.on.event(PARALLELJOB.group, PARALLELJOB.version, PARALLELJOB.plural)
async def paralleljob_event(event: kopf.RawEvent, memo: Any, **_: Any) -> None:
    await _job_event(_app(memo).controllers[PARALLELJOB.kind], event)


async def job_event(event: kopf.RawEvent, memo: Any, **_: Any) -> None:
    await _job_event(_app(memo).controllers[_JOB.kind], event)


def watch_jobs() -> None:
    """Registers the batch/v1 Job handler (PJ_MANAGE_JOBS is not off): the operator
    then lists and watches Jobs, which needs its RBAC's jobs rule."""
    kopf.on.event(_JOB.group, _JOB.version, _JOB.plural)(job_event)


@kopf.on.probe(id="progress")
async def progress(memo: Any, **_: Any) -> dict[str, int]:
    """Fails (so /healthz answers 500) while a job loop is not getting through its work."""
    app: App | None = getattr(memo, "app", None)
    if app is None:  # before startup
        return {"jobs": 0}
    now = time.monotonic()
    found = [stall for c in app.controllers.values() for stall in c.stalls(now)]
    if found:
        raise kopf.PermanentError(describe(found))
    return {"jobs": sum(len(c.jobs) for c in app.controllers.values())}
