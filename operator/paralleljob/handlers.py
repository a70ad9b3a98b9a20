"""The kopf wiring: thin handlers that feed the controllers, one per kind of job
(core/kind.py): ParallelJobs always, batch/v1 Jobs unless PJ_MANAGE_JOBS is off.

* ``pods_by_job`` -- an index of the operator's pods by their job's uid, holding the
  few fields the core needs (a PodInfo), never whole pod bodies; each pod read as of
  its kind (kind.kind_of_pod).
* ``paralleljobs_by_uid``, ``jobs_by_uid`` -- which jobs exist (to recognise orphaned
  pods).
* ``pod_event`` -- any event of one of the operator's pods wakes its job's loop: a pod
  event reaches a decision without listing anything. Pods get no create/update
  handlers, so kopf never writes to a pod.
* ``paralleljob_event``, ``job_event`` -- the first event of a job starts its sync loop
  (an asyncio task, not a kopf daemon: a daemon would need a finalizer on every job,
  and deleting a job must never wait for the operator); later events wake it; DELETED
  stops it and releases its pods' finalizers. The Job handlers are registered only
  when Jobs are managed (:func:`watch_jobs`, called by the CLI).
* ``progress`` -- a probe: ``/healthz`` fails while a job loop has work pending for
  longer than ``PJ_LIVENESS_STALL_SECONDS`` (see progress.py).
* ``startup`` -- builds what the handlers share from the settings in kopf's memo
  (parsed once by the CLI) and serves the Prometheus metrics (metrics.py).

The pod watch is filtered on the server by the label every pod the operator creates
carries (kind.WATCH_LABEL, settings.watching.label_selectors), except with
PJ_MANAGE_JOBS=all: then the pods the built-in Job controller created are the
operator's too, and they carry only ``batch.kubernetes.io/controller-uid``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import kopf
from aiohttp import web

from .config import MANAGE_JOBS_ALL, MANAGE_JOBS_OFF, OperatorConfig
from .core.kind import PARALLELJOB, WATCH_LABEL, JobKind, batch_job, kind_of_pod
from .core.model import PodInfo, parse_pod
from .shell import metrics
from .shell.controller import Controller
from .shell.events import EventRecorder
from .shell.kube import Kube, load_configuration
from .shell.progress import describe
from .shell.ref_manager import candidate_jobs

log = logging.getLogger(__name__)

#: What a pod event is read as when no Job controller runs (the keys are the same for
#: both settings of batch_job).
_JOB_PODS = batch_job(take_unmanaged=False)
#: The labels that make a pod one of a job's: the operator's, or a Job's (all mode).
_POD_LABELS = (WATCH_LABEL, _JOB_PODS.controller_uid_label)
_TRACKING_FINALIZERS = frozenset(_JOB_PODS.finalizers + PARALLELJOB.finalizers)


def job_kinds(config: OperatorConfig) -> tuple[JobKind, ...]:
    """The kinds of job the operator reconciles with these settings, a pod's kind looked
    up in this order (a Job's pods made by the operator carry both kinds' labels)."""
    if config.manage_jobs == MANAGE_JOBS_OFF:
        return (PARALLELJOB,)
    return (batch_job(take_unmanaged=config.manage_jobs == MANAGE_JOBS_ALL), PARALLELJOB)


class App:
    """What the handlers share, built at startup inside kopf's event loop."""

    #: A controller per kind of job, by kind name (JobKind.kind).
    controllers: dict[str, Controller]
    kinds: tuple[JobKind, ...]
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


def _is_jobs_pod(meta: Mapping[str, Any], **_: Any) -> bool:
    """A pod labelled as a job's; or one that was and still holds a tracking finalizer
    (its labels removed: with PJ_MANAGE_JOBS=all no server-side selector turns that
    into a DELETED event, and its job must release it, as upstream's ref manager does)."""
    labels = meta.get("labels") or {}
    finalizers = meta.get("finalizers") or ()
    return any(label in labels for label in _POD_LABELS) or any(
        f in _TRACKING_FINALIZERS for f in finalizers
    )


def _read_pod(app: App, body: kopf.Body) -> tuple[Controller, PodInfo] | None:
    """The controller of a pod's kind and the pod read as of that kind; None for a pod
    of a kind not reconciled."""
    kind = kind_of_pod(body.get("metadata", {}), app.kinds)
    controller = app.controllers.get(kind.kind) if kind is not None else None
    if kind is None or controller is None:
        return None
    return controller, parse_pod(body, kind)


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
    """Builds a controller per kind once, with the indexes kopf fills (empty until the
    initial listing): the pods by job uid, and which jobs of each kind exist."""
    config: OperatorConfig = getattr(memo, "config", None) or OperatorConfig()
    settings.posting.enabled = False  # the operator posts its own Events
    settings.persistence.diffbase_storage = NoDiffBase()
    if config.manage_jobs != MANAGE_JOBS_ALL:
        settings.watching.label_selectors["", "v1", "pods"] = WATCH_LABEL
    settings.execution.max_workers = 2  # nothing runs in threads
    api = config.api
    kube = Kube(
        await load_configuration(), concurrency=api.concurrency, qps=api.qps, burst=api.burst
    )
    app = App()
    app.kube = kube
    app.recorder = EventRecorder(kube)
    app.kinds = job_kinds(config)
    pods_of = _pods_of(kwargs["pods_by_job"])
    indexes = {PARALLELJOB.kind: "paralleljobs_by_uid", _JOB_PODS.kind: "jobs_by_uid"}
    app.controllers = {}
    for kind in app.kinds:
        jobs: kopf.Index[str, bool] = kwargs[indexes[kind.kind]]
        app.controllers[kind.kind] = Controller(
            kube.for_kind(kind),
            app.recorder,
            config.controller,
            pods_of=pods_of,
            job_exists=jobs.__contains__,
            kind=kind,
        )
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
    await app.kube.close()


@kopf.index("", "v1", "pods", when=_is_jobs_pod)
async def pods_by_job(body: kopf.Body, memo: Any, **_: Any) -> dict[str, PodInfo]:
    read = _read_pod(_app(memo), body)
    if read is None:
        return {}
    pod = read[1]
    return {uid: pod for uid in candidate_jobs(pod)}


@kopf.index(PARALLELJOB.group, PARALLELJOB.version, PARALLELJOB.plural)
async def paralleljobs_by_uid(uid: str | None, **_: Any) -> dict[str, bool]:
    return {uid or "": True}


async def jobs_by_uid(uid: str | None, **_: Any) -> dict[str, bool]:
    return {uid or "": True}


@kopf.on.event("", "v1", "pods", when=_is_jobs_pod)
async def pod_event(event: kopf.RawEvent, body: kopf.Body, memo: Any, **_: Any) -> None:
    read = _read_pod(_app(memo), body)
    if read is not None:
        controller, pod = read
        await controller.pod_seen(pod, gone=event.get("type") == "DELETED")


async def _job_event(controller: Controller, event: kopf.RawEvent) -> None:
    """Every job event (and the initial listing) drives that job's loop."""
    obj = event.get("object")
    if not isinstance(obj, dict):
        return
    if event.get("type") == "DELETED":
        meta = obj.get("metadata", {})
        await controller.job_gone(str(meta.get("uid", "")), str(meta.get("namespace", "")))
        return
    controller.job_seen(obj)


@kopf.on.event(PARALLELJOB.group, PARALLELJOB.version, PARALLELJOB.plural)
async def paralleljob_event(event: kopf.RawEvent, memo: Any, **_: Any) -> None:
    await _job_event(_app(memo).controllers[PARALLELJOB.kind], event)


async def job_event(event: kopf.RawEvent, memo: Any, **_: Any) -> None:
    await _job_event(_app(memo).controllers[_JOB_PODS.kind], event)


def watch_jobs() -> None:
    """Registers the batch/v1 Job handlers (PJ_MANAGE_JOBS is not off): the operator
    then lists and watches Jobs, which needs its RBAC's jobs rule."""
    resource = (_JOB_PODS.group, _JOB_PODS.version, _JOB_PODS.plural)
    kopf.index(*resource)(jobs_by_uid)
    kopf.on.event(*resource)(job_event)


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
