"""Pod writes (upstream's ``podControl`` and the pod half of ``manageJob``): creations in
slow-start batches, deletions (a pod past podStartDeadlineSeconds failed first),
finalizer removals, each recorded in the job's expectations until the pod watch shows
it; and pods left without a job (orphans, pods that left the watch) released of their
tracking finalizer."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from .. import constants as c
from ..config import ControllerConfig
from ..core import Condition, PodInfo, PodOutcome, PodPlan, condition_to_dict, new_pod_bodies
from ..json_types import JsonDict
from ..runtime import metrics
from ..runtime.api import ApiError, PodControl
from ..runtime.consistency import PODS
from ..runtime.events import Recorder
from ..runtime.retry import Retry
from .job_runtime import JobRuntime

log = logging.getLogger(__name__)


def _always() -> bool:
    return True


#: The largest batch of pod creations sent at once (upstream's
#: MaxPodCreateDeletePerSync bounds a whole sync the same way).
MAX_SLOW_START_BATCH = 500

#: The status cause of a creation refused because the namespace is being deleted.
NAMESPACE_TERMINATING = "NamespaceTerminating"


class PodWriter:
    def __init__(
        self,
        api: PodControl,
        recorder: Recorder,
        config: ControllerConfig,
        monotonic: Callable[[], float],
    ) -> None:
        self.api = api
        self.recorder = recorder
        self.config = config
        self.monotonic = monotonic
        #: Pods (namespace, name) whose orphan release is in flight.
        self.releasing_orphans: set[tuple[str, str]] = set()
        #: Held by a sync while it creates pods (ControllerConfig.concurrent_creating_syncs).
        self.creating = asyncio.Semaphore(config.concurrent_creating_syncs)

    async def apply(
        self, rt: JobRuntime, plan: PodPlan, creation_reason: str = metrics.CREATE_NEW
    ) -> tuple[PodOutcome, float | None]:
        """The plan's pod deletions or creations; with the delay before creations may be
        tried again after a failure (None: no retry pending)."""
        if plan.delete:
            return await self._delete_pods(rt, plan), None
        if plan.create <= 0:
            return PodOutcome(), None
        state = rt.pods
        wait = state.create_retry_at - self.monotonic()
        if wait > 0:
            return PodOutcome(), wait
        async with self.creating:
            created, error = await self._create_pods(rt, plan, creation_reason)
        if error is None:
            state.create_retry.succeeded()
            return PodOutcome(created=created), None
        delay = state.create_retry.failed(
            self.config.retry_base_seconds, self.config.retry_max_seconds
        )
        state.create_retry_at = self.monotonic() + delay
        log.warning(
            "%s/%s: pod creation failed (retry in %.0fs): %s", rt.namespace, rt.name, delay, error
        )
        return PodOutcome(created=created, create_error=error), delay

    async def _delete_pods(self, rt: JobRuntime, plan: PodPlan) -> PodOutcome:
        results = await asyncio.gather(
            *(
                self._delete_pod(rt, p, plan.remove_finalizer_before_delete, plan.fail_condition)
                for p in plan.delete
            )
        )
        return PodOutcome(
            deleted=tuple(p.uid for p, ok in zip(plan.delete, results, strict=True) if ok)
        )

    async def _create_pods(
        self, rt: JobRuntime, plan: PodPlan, reason: str
    ) -> tuple[int, str | None]:
        """Slow start, as upstream: batches of 1, 2, 4, ...; stop at the first error.
        An Indexed job's pods are created for ``plan.create_indexes`` in order.

        Unlike upstream, a job whose creations all succeeded last time starts where that
        slow start ended rather than at 1: slow start guards against a flood of doomed
        requests (quota, admission), and a batch that just succeeded in full says the
        next is not doomed. An error starts the next slow start at 1 again."""
        state = rt.pods
        created = 0
        batch = state.slow_start_batch
        remaining = plan.create
        new_pods = new_pod_bodies(rt.body, rt.job, plan, rt.kind)
        while remaining > 0:
            size = min(batch, remaining)
            batch_pods = [next(new_pods) for _ in range(size)]
            results = await asyncio.gather(*(self._create_pod(rt, pod) for pod in batch_pods))
            created += sum(1 for r in results if r is None)
            errors = [r for r in results if r is not None]
            # As upstream, a creation refused for a terminating namespace counts neither way.
            refused = sum(1 for e in errors if not e.has_cause(NAMESPACE_TERMINATING))
            metrics.record_pods_creation(reason, size - len(errors), refused)
            if errors:
                state.slow_start_batch = 1
                if all(e.has_cause(NAMESPACE_TERMINATING) for e in errors):
                    # As upstream: every later creation fails too, and the namespace's
                    # deletion takes the job with it; no error, no retry, no event.
                    return created, None
                return created, errors[0].message or str(errors[0])
            remaining -= size
            state.slow_start_batch = max(state.slow_start_batch, size)
            batch = min(batch * 2, MAX_SLOW_START_BATCH)
        return created, None

    async def _create_pod(self, rt: JobRuntime, new_pod: JsonDict) -> ApiError | None:
        try:
            pod = await self.api.create_pod(rt.namespace, new_pod)
        except ApiError as exc:
            return exc
        meta = pod.get("metadata", {})
        rt.pods.expectations.expect_creation(str(meta.get("uid", "")), self.monotonic())
        rt.own_writes.wrote(PODS, meta.get("resourceVersion"))
        self.recorder.record(
            rt.ref, c.NORMAL, c.REASON_SUCCESSFUL_CREATE, f"Created pod: {meta.get('name')}"
        )
        return None

    async def _delete_pod(
        self,
        rt: JobRuntime,
        pod: PodInfo,
        remove_finalizer: bool,
        fail_condition: Condition | None = None,
    ) -> bool:
        """deleteJobPods: the finalizer first when the pod must not count as failed; a
        pod given ``fail_condition`` (podStartDeadlineSeconds) is failed first, and is
        not deleted unless that write succeeded, so that a pod deleted for its start
        deadline always carries the condition a pod failure policy looks for."""
        if fail_condition is not None and not await self._fail_pod(rt, pod, fail_condition):
            return False
        expectations = rt.pods.expectations
        try:
            if remove_finalizer and pod.has_finalizer:
                try:
                    patched = await self.api.remove_pod_finalizer(rt.namespace, pod.name)
                    expectations.expect_finalizer_removed(pod.uid, self.monotonic())
                    rt.own_writes.wrote(PODS, patched.get("metadata", {}).get("resourceVersion"))
                except ApiError as exc:
                    if not exc.not_found:
                        raise
            await self.api.delete_pod(rt.namespace, pod.name, pod.uid)
        except ApiError as exc:
            if exc.not_found:
                return True
            self.recorder.record(
                rt.ref, c.WARNING, c.REASON_FAILED_DELETE, f"Error deleting: {exc.message}"
            )
            log.warning("%s/%s: deleting pod %s failed: %s", rt.namespace, rt.name, pod.name, exc)
            return False
        expectations.expect_deletion(pod.uid, self.monotonic())
        self.recorder.record(
            rt.ref, c.NORMAL, c.REASON_SUCCESSFUL_DELETE, f"Deleted pod: {pod.name}"
        )
        return True

    async def _fail_pod(self, rt: JobRuntime, pod: PodInfo, condition: Condition) -> bool:
        """The phase Failed and ``condition`` on the pod, if it is still the version the
        decision was made on; whether they were written. The next sync waits for the
        cache to show the version written (read-your-writes: until then the pod would
        look unstarted). A pod already gone was not failed by this write, and one that
        changed (a container may have started) is judged again by the next sync: no
        Event says either was."""
        try:
            failed = await self.api.fail_pod(
                rt.namespace, pod.name, pod.uid, pod.unstarted_version, condition_to_dict(condition)
            )
        except ApiError as exc:
            if exc.conflict:
                log.info(
                    "%s/%s: pod %s changed since it was judged unstarted; judged again",
                    rt.namespace, rt.name, pod.name,
                )  # fmt: skip
            elif not exc.not_found:
                self.recorder.record(
                    rt.ref, c.WARNING, c.REASON_FAILED_DELETE, f"Error deleting: {exc.message}"
                )
                log.warning(
                    "%s/%s: failing pod %s failed: %s", rt.namespace, rt.name, pod.name, exc
                )
            return False
        rt.own_writes.wrote(PODS, failed.get("metadata", {}).get("resourceVersion"))
        return True

    async def remove_finalizers(self, rt: JobRuntime, pods: Iterable[PodInfo]) -> list[str]:
        """The finished pods' finalizers, once status write 1 records them: the UIDs of
        the pods whose finalizer is gone (those only are counted)."""
        pods = list(pods)

        async def remove(pod: PodInfo) -> bool:
            try:
                patched = await self.api.remove_pod_finalizer(rt.namespace, pod.name)
                rt.own_writes.wrote(PODS, patched.get("metadata", {}).get("resourceVersion"))
            except ApiError as exc:
                if not exc.not_found:
                    log.warning(
                        "%s/%s: releasing pod %s failed: %s", rt.namespace, rt.name, pod.name, exc
                    )
                    return False
            rt.pods.expectations.expect_finalizer_removed(pod.uid, self.monotonic())
            return True

        results = await asyncio.gather(*(remove(p) for p in pods))
        return [p.uid for p, ok in zip(pods, results, strict=True) if ok]

    # -- pods without a job ------------------------------------------------------------
    async def release_orphan(
        self, namespace: str, name: str, still_orphan: Callable[[], bool] = _always
    ) -> None:
        """A pod whose job is gone keeps no finalizer (upstream's orphan queue); a pod
        already being released (its job's deletion, then its own events) is released once.
        A refused removal is tried again after the shell's retry back-off for as long as
        the pod cache still shows an orphan with the finalizer (Kubernetes 1.37's
        syncOrphanPod, requeued rate-limited: before, a pod that got no further event
        kept its finalizer, and its deletion hung)."""
        key = (namespace, name)
        if key in self.releasing_orphans:
            return
        self.releasing_orphans.add(key)
        retry = Retry()
        try:
            while not await self._remove_orphan_finalizer(namespace, name):
                await asyncio.sleep(
                    retry.failed(self.config.retry_base_seconds, self.config.retry_max_seconds)
                )
                if not still_orphan():
                    return
        finally:
            self.releasing_orphans.discard(key)

    async def _remove_orphan_finalizer(self, namespace: str, name: str) -> bool:
        """One try: False if it is worth another (not a pod gone, nor a write this
        replica may no longer make: the leader that follows releases the orphans it
        lists)."""
        try:
            await self.api.remove_pod_finalizer(namespace, name)
        except ApiError as exc:
            if exc.not_found or exc.reason == c.NOT_LEADING:
                return True
            log.warning("releasing orphan pod %s/%s failed: %s", namespace, name, exc)
            return False
        log.info("released orphan pod %s/%s", namespace, name)
        return True

    async def release_unwatched(self, pod: PodInfo) -> None:
        """A pod that left the operator's pod watch (its job label removed) with the
        tracking finalizer on: ReleasePod, whatever its job is doing."""
        try:
            if pod.controller_uid:
                await self.api.release_pod(pod.namespace, pod.name, pod.uid, pod.controller_uid)
            else:
                await self.api.remove_pod_finalizer(pod.namespace, pod.name)
            log.info(
                "released pod %s/%s: it no longer has its job's label", pod.namespace, pod.name
            )
        except ApiError as exc:
            if exc.status not in (404, 409, 422):
                log.warning("releasing pod %s/%s failed: %s", pod.namespace, pod.name, exc)
