"""The kopf wiring: thin handlers that feed the controller.

* ``pods_by_job`` -- an index of the operator's pods by their job's uid, holding the
  few fields the core needs (a PodInfo), never whole pod bodies.
* ``paralleljobs_by_uid`` -- which jobs exist (to recognise orphaned pods).
* ``pod_event`` -- any event of one of the operator's pods wakes its job's loop: a pod
  event reaches a decision without listing anything. Pods get no create/update
  handlers, so kopf never writes to a pod.
* ``job_event`` -- the first event of a ParallelJob starts its sync loop (an asyncio
  task, not a kopf daemon: a daemon would need a finalizer on every ParallelJob, and
  deleting a job must never wait for the operator); later events wake it; DELETED
  stops it and releases its pods' finalizers.
* ``progress`` -- a probe: ``/healthz`` fails while a job loop has work pending for
  longer than ``PJ_LIVENESS_STALL_SECONDS`` (see progress.py).
* ``startup`` -- builds what the handlers share from the settings in kopf's memo
  (parsed once by the CLI) and serves the Prometheus metrics (metrics.py).

The pod watch is filtered on the server by the label selector
``paralleljob.dev/controller-uid`` (settings.watching.label_selectors).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

import kopf
from aiohttp import web

from .config import OperatorConfig
from .core.kind import PARALLELJOB
from .core.model import PodInfo, parse_pod
from .shell import metrics
from .shell.controller import Controller
from .shell.events import EventRecorder
from .shell.kube import Kube, load_configuration
from .shell.progress import describe
from .shell.ref_manager import candidate_jobs

log = logging.getLogger(__name__)

#: The one kind of job the operator runs today (core/kind.py: the seam for a second).
KIND = PARALLELJOB
POD_SELECTOR = {KIND.controller_uid_label: kopf.PRESENT}


class App:
    """What the handlers share, built at startup inside kopf's event loop."""

    controller: Controller
    kube: Kube
    recorder: EventRecorder
    metrics_server: web.AppRunner | None
    loop_lag: asyncio.Task[None]


def _app(memo: Any) -> App:
    app: App = memo.app
    return app


def _pods_of(index: kopf.Index[str, PodInfo]) -> Callable[[str], list[PodInfo]]:
    """The pod index as the controller reads it: a job uid's pods."""

    def pods_of(uid: str) -> list[PodInfo]:
        store = index.get(uid)
        return list(store) if store is not None else []

    return pods_of


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
async def startup(settings: kopf.OperatorSettings, memo: Any, **kwargs: Any) -> None:
    """Builds the controller once, with the indexes kopf fills (empty until the
    initial listing): the pods by job uid, and which jobs exist."""
    config: OperatorConfig = getattr(memo, "config", None) or OperatorConfig()
    settings.posting.enabled = False  # the operator posts its own Events
    settings.persistence.diffbase_storage = NoDiffBase()
    settings.watching.label_selectors["", "v1", "pods"] = KIND.controller_uid_label
    settings.execution.max_workers = 2  # nothing runs in threads
    api = config.api
    kube = Kube(
        await load_configuration(),
        concurrency=api.concurrency,
        qps=api.qps,
        burst=api.burst,
        kind=KIND,
    )
    recorder = EventRecorder(kube)
    app = App()
    app.kube = kube
    app.recorder = recorder
    pods_by_job: kopf.Index[str, PodInfo] = kwargs["pods_by_job"]
    jobs: kopf.Index[str, bool] = kwargs["paralleljobs_by_uid"]
    app.controller = Controller(
        kube,
        recorder,
        config.controller,
        pods_of=_pods_of(pods_by_job),
        job_exists=lambda uid: uid in jobs,
        kind=KIND,
    )
    metrics.track_state(app.controller)
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
    await app.controller.stop_all()
    if app.metrics_server is not None:
        await app.metrics_server.cleanup()
    await app.recorder.close()
    await app.kube.close()


@kopf.index("", "v1", "pods", labels=POD_SELECTOR)
async def pods_by_job(body: kopf.Body, **_: Any) -> dict[str, PodInfo]:
    pod = parse_pod(body, KIND)
    return {uid: pod for uid in candidate_jobs(pod)}


@kopf.index(KIND.group, KIND.version, KIND.plural)
async def paralleljobs_by_uid(uid: str | None, **_: Any) -> dict[str, bool]:
    return {uid or "": True}


@kopf.on.event("", "v1", "pods", labels=POD_SELECTOR)
async def pod_event(event: kopf.RawEvent, body: kopf.Body, memo: Any, **_: Any) -> None:
    await _app(memo).controller.pod_seen(parse_pod(body, KIND), gone=event.get("type") == "DELETED")


@kopf.on.event(KIND.group, KIND.version, KIND.plural)
async def job_event(event: kopf.RawEvent, memo: Any, **_: Any) -> None:
    """Every job event (and the initial listing) drives that job's loop."""
    obj = event.get("object")
    if not isinstance(obj, dict):
        return
    controller = _app(memo).controller
    if event.get("type") == "DELETED":
        meta = obj.get("metadata", {})
        await controller.job_gone(str(meta.get("uid", "")), str(meta.get("namespace", "")))
        return
    controller.job_seen(obj)


@kopf.on.probe(id="progress")
async def progress(memo: Any, **_: Any) -> dict[str, int]:
    """Fails (so /healthz answers 500) while a job loop is not getting through its work."""
    app: App | None = getattr(memo, "app", None)
    if app is None:  # before startup
        return {"jobs": 0}
    found = app.controller.stalls(time.monotonic())
    if found:
        raise kopf.PermanentError(describe(found))
    return {"jobs": len(app.controller.jobs)}
