"""The kopf wiring: thin handlers that feed the controllers, one per kind of job
(core/kind.py): ParallelJobs always, batch/v1 Jobs unless PJ_MANAGE_JOBS is off.

* ``paralleljob_event``, ``job_event`` -- the first event of a job starts its sync loop
  (an asyncio task, not a kopf daemon: a daemon would need a finalizer on every job,
  and deleting a job must never wait for the operator); later events wake it; DELETED
  stops it and releases its pods' finalizers. The Job handlers are registered only
  when Jobs are managed (:func:`watch_jobs`, called by the CLI).
* ``progress`` -- a probe: ``/healthz`` fails while a job loop has work pending for
  longer than ``PJ_LIVENESS_STALL_SECONDS`` (see progress.py).
* ``startup`` -- builds what the handlers share from the settings in kopf's memo
  (parsed once by the CLI), starts the informers and serves the Prometheus metrics
  (metrics.py).

Pods are not kopf's: the operator's own informers (shell/informer.py) list them in
pages and watch them, each pod read once into a PodInfo (kind.kind_of_pod says as what
kind's) and filed by its jobs' uids (pod_cache.py); any change of one wakes its job's
loop. A metadata-only informer per kind says which jobs exist, for orphaned pods. No
job syncs before the pods are listed, no pod is judged an orphan before the jobs are
(CacheSync). kopf has no index, so no barrier that holds every handler until every
object is indexed (issue 23: CPU quadratic in the objects).

The pod watch is filtered on the server by the label every pod the operator creates
carries (kind.WATCH_LABEL), except with PJ_MANAGE_JOBS=all: then the pods the built-in
Job controller created are the operator's too, and they carry only
``batch.kubernetes.io/controller-uid``.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import replace
from typing import Any

import kopf
from aiohttp import web

from .config import MANAGE_JOBS_ALL, MANAGE_JOBS_OFF, OperatorConfig
from .core.kind import PARALLELJOB, WATCH_LABEL, JobKind, batch_job, kind_of_pod
from .core.model import PodInfo, parse_pod
from .json_types import JsonDict
from .shell import metrics
from .shell.controller import CacheSync, Controller
from .shell.events import EventRecorder
from .shell.informer import PAGE_SIZE, Informer, KubeListWatch
from .shell.kube import Kube, load_configuration
from .shell.pod_cache import PodCache
from .shell.progress import describe

log = logging.getLogger(__name__)

#: What a pod event is read as when no Job controller runs (the keys are the same for
#: both settings of batch_job).
_JOB_PODS = batch_job(take_unmanaged=False)
#: The labels that make a pod one of a job's: the operator's, or a Job's (all mode).
_POD_LABELS = (WATCH_LABEL, _JOB_PODS.controller_uid_label)
_TRACKING_FINALIZERS = frozenset(_JOB_PODS.finalizers + PARALLELJOB.finalizers)

#: A pod as the pod informer keeps it: its kind's name and what the core reads.
CachedPod = tuple[str, PodInfo]


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
    pods: PodCache
    #: The pod informers, and a metadata-only informer of each kind's jobs, by kind
    #: name (one of each per namespace watched, or one for all of them).
    pod_informers: list[Informer[CachedPod]]
    job_informers: dict[str, list[Informer[str]]]
    synced: CacheSync
    #: The informers, their sync, and the finalizer releases pod changes called for.
    tasks: set[asyncio.Task[None]]
    metrics_server: web.AppRunner | None
    loop_lag: asyncio.Task[None]


def _app(memo: Any) -> App:
    app: App = memo.app
    return app


def _is_jobs_pod(meta: Mapping[str, Any]) -> bool:
    """A pod labelled as a job's; or one that was and still holds a tracking finalizer
    (its labels removed: with PJ_MANAGE_JOBS=all no server-side selector turns that
    into a DELETED event, and its job must release it, as upstream's ref manager does)."""
    labels = meta.get("labels") or {}
    finalizers = meta.get("finalizers") or ()
    return any(label in labels for label in _POD_LABELS) or any(
        f in _TRACKING_FINALIZERS for f in finalizers
    )


def read_pod(app: App, body: Mapping[str, Any]) -> CachedPod | None:
    """A pod read as of its kind; None for a pod of no job, or of a kind not reconciled."""
    meta = body.get("metadata") or {}
    if not _is_jobs_pod(meta):
        return None
    kind = kind_of_pod(meta, app.kinds)
    if kind is None or kind.kind not in app.controllers:
        return None
    return kind.kind, parse_pod(body, kind)


def pod_changed(app: App, old: CachedPod | None, new: CachedPod | None, gone: bool) -> None:
    """The pod informer's change: the cache files the pod anew and its kind's controller
    sees it (a pod no longer a job's is seen as gone, without the finalizer it no longer
    has); a finalizer release it calls for runs beside the watch. A deleted pod's last
    state is seen, but no longer filed."""
    app.pods.change(old[1] if old else None, new[1] if new and not gone else None)
    if new is not None:
        kind, pod = new
    elif old is not None:
        kind, pod = old[0], old[1] if gone else replace(old[1], has_finalizer=False)
        gone = True
    else:
        return
    release = app.controllers[kind].observe_pod(pod, gone)
    if release is not None:
        _spawn(app, release, f"release {pod.namespace}/{pod.name}")


def _spawn(app: App, coro: Coroutine[Any, Any, None], name: str) -> None:
    task = asyncio.create_task(coro, name=name)
    app.tasks.add(task)
    task.add_done_callback(app.tasks.discard)


def _scopes(config: OperatorConfig) -> tuple[str, ...]:
    """The namespaces watched, "" for all of them."""
    return config.namespaces or ("",)


def _pods_path(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"


def _jobs_path(kind: JobKind, namespace: str) -> str:
    if namespace:
        return kind.path(namespace)
    root = f"/apis/{kind.group}/{kind.version}" if kind.group else f"/api/{kind.version}"
    return f"{root}/{kind.plural}"


def _start_informers(app: App, config: OperatorConfig) -> None:
    """The pod informers and the jobs' metadata informers, each a task; and the task
    that opens the gates as they sync (CacheSync)."""
    selector = "" if config.manage_jobs == MANAGE_JOBS_ALL else WATCH_LABEL
    app.pod_informers = [
        Informer(
            KubeListWatch(app.kube, _pods_path(ns)),
            project=lambda body: read_pod(app, body),
            on_change=lambda old, new, gone: pod_changed(app, old, new, gone),
            name=f"pods in {ns or 'all namespaces'}",
            label_selector=selector,
        )
        for ns in _scopes(config)
    ]
    app.job_informers = {
        kind.kind: [
            Informer(
                KubeListWatch(app.kube, _jobs_path(kind, ns), metadata_only=True),
                project=_job_uid,
                on_change=_job_listed(app, kind.kind),
                name=f"{kind.plural} in {ns or 'all namespaces'}",
            )
            for ns in _scopes(config)
        ]
        for kind in app.kinds
    }
    informers: list[Informer[Any]] = [*app.pod_informers]
    for each in app.job_informers.values():
        informers.extend(each)
    for informer in informers:
        _spawn(app, informer.run(), informer.name)
    _spawn(app, _open_gates(app), "cache sync")
    _spawn(app, _freeze_until_synced(app), "freeze what the startup builds")


def _job_uid(body: JsonDict) -> str:
    """What a job informer keeps of a job: that it exists, by its uid."""
    return str((body.get("metadata") or {}).get("uid") or "")


def _job_listed(app: App, kind: str) -> Callable[[str | None, str | None, bool], None]:
    def on_change(old: str | None, new: str | None, gone: bool) -> None:
        """A job deleted (or no longer listed): the pods it still holds are released."""
        if gone and old:
            for release in app.controllers[kind].job_unlisted(old):
                _spawn(app, release, f"release the pods of deleted job {old}")

    return on_change


async def _open_gates(app: App) -> None:
    """Job syncs start once every pod is listed; orphans are judged once every job is
    too."""
    await asyncio.gather(*(i.synced.wait() for i in app.pod_informers))
    app.synced.pods.set()
    log.info("pods listed: %d jobs have pods", len(app.pods))
    for informers in app.job_informers.values():
        await asyncio.gather(*(i.synced.wait() for i in informers))
    app.synced.jobs.set()
    await asyncio.gather(*(c.judge_orphans() for c in app.controllers.values()))


#: How often the startup freezes what it has built (seconds).
FREEZE_EVERY = 1.0


async def _freeze_until_synced(app: App) -> None:
    """Freezes every second, from the first listing until every job is listed and no
    sync has been pending for two looks (every job synced once). What a startup builds
    (a projection per pod, a record per job) lives as long as its object, and a full
    collection scans every tracked object not frozen: over 50,000 pods and 10,000 jobs
    one held the loop for 0.2-0.5 s, several times a second (the freeze of what was
    imported, cli.py, leaves the GC's growth heuristic little to compare against).
    Frozen within a second of being built, each is scanned by no later collection."""
    quiet = 0
    while quiet < 2:
        _freeze_survivors()
        await asyncio.sleep(FREEZE_EVERY)
        busy = not app.synced.jobs.is_set() or any(
            c.pending_syncs() for c in app.controllers.values()
        )
        quiet = 0 if busy else quiet + 1
    _freeze_survivors()


def _freeze_survivors() -> None:
    """Collects the young generations (a few milliseconds: what the last second left as
    cyclic garbage is freed, not frozen for good), then freezes what is left."""
    gc.collect(1)
    gc.freeze()


def _job_exists(app: App, kind: JobKind, controller: Controller) -> Callable[[str], bool]:
    def job_exists(uid: str) -> bool:
        """Listed or watched, or already seen by the controller (kopf's job watch may
        be ahead of the metadata informer)."""
        rt = controller.jobs.get(uid)
        return (
            (rt is not None and not rt.loop.stopped)  # a stopped loop's job is gone
            or uid in controller.left_alone
            or any(uid in i.store for i in app.job_informers[kind.kind])
        )

    return job_exists


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
    api = config.api
    kube = Kube(
        await load_configuration(), concurrency=api.concurrency, qps=api.qps, burst=api.burst
    )
    app = App()
    app.kube = kube
    app.recorder = EventRecorder(kube)
    app.kinds = job_kinds(config)
    app.pods = PodCache()
    app.synced = CacheSync(pods=asyncio.Event(), jobs=asyncio.Event())
    app.tasks = set()
    app.controllers = {}
    for kind in app.kinds:
        controller = Controller(
            kube.for_kind(kind),
            app.recorder,
            config.controller,
            pods_of=app.pods.pods_of,
            kind=kind,
            synced=app.synced,
        )
        controller.job_exists = _job_exists(app, kind, controller)
        app.controllers[kind.kind] = controller
    _start_informers(app, config)
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
    for task in list(app.tasks):
        task.cancel()
    await asyncio.gather(*app.tasks, return_exceptions=True)
    await asyncio.gather(*(c.stop_all() for c in app.controllers.values()))
    if app.metrics_server is not None:
        await app.metrics_server.cleanup()
    await app.recorder.close()
    await app.kube.close()


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
    await _job_event(_app(memo).controllers[_JOB_PODS.kind], event)


def watch_jobs() -> None:
    """Registers the batch/v1 Job handler (PJ_MANAGE_JOBS is not off): the operator
    then lists and watches Jobs, which needs its RBAC's jobs rule."""
    kopf.on.event(_JOB_PODS.group, _JOB_PODS.version, _JOB_PODS.plural)(job_event)


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
