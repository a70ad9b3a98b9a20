"""A ParallelCronJob and its ParallelJobs as the cron decision reads them (cron_sync.py),
parsed from the API's JSON; the status back to a merge patch; and a ParallelJob built from
the jobTemplate (upstream's ``getJobFromTemplate2``, pkg/controller/cronjob/utils.go)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from ... import constants as c
from ...json_types import JsonDict, as_dict
from ...timeutil import format_time, parse_time
from ..job.model import has_true_condition, is_finished, parse_status
from ..job.ttl import job_finish_time
from .cron_sync import (
    ActiveRef,
    ChildJob,
    CronInput,
    CronSpec,
    CronStatus,
    JobToCreate,
    scheduled_timestamp_annotation,
)

CRON_KIND: Final = "ParallelCronJob"
CRON_PLURAL: Final = "parallelcronjobs"
#: batch/v1 CronScheduledTimestampAnnotation: the time a job was scheduled for, in the
#: cron job's time zone (RFC 3339), on each ParallelJob started on schedule.
SCHEDULED_TIMESTAMP_ANNOTATION: Final = "batch.kubernetes.io/cronjob-scheduled-timestamp"
#: A new value starts one ParallelJob now (status.lastTrigger keeps the last one acted on).
TRIGGER_ANNOTATION: Final = f"{c.GROUP}/trigger"
#: The reasons of the plan's events that mean the schedule cannot be used.
INVALID_SCHEDULE_REASONS: Final = frozenset(
    {"UnparseableSchedule", c.REASON_UNKNOWN_TIME_ZONE, "InvalidSchedule"}
)


def cron_path(namespace: str, name: str = "", subresource: str = "") -> str:
    """The API path of the ParallelCronJobs of ``namespace`` ("": of all namespaces), of
    one, or of one's subresource (``status``)."""
    root = f"/apis/{c.API_VERSION}"
    path = f"{root}/namespaces/{namespace}/{CRON_PLURAL}" if namespace else f"{root}/{CRON_PLURAL}"
    path += f"/{name}" if name else ""
    return path + (f"/{subresource}" if subresource else "")


def controlled_by(body: Mapping[str, Any], owner_uid: str) -> bool:
    """metav1.IsControlledBy: the object's controller reference names ``owner_uid``."""
    return any(
        isinstance(ref, Mapping) and ref.get("controller") is True and ref.get("uid") == owner_uid
        for ref in as_dict(body.get("metadata")).get("ownerReferences") or ()
    )


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def parse_cron_spec(spec: Mapping[str, Any]) -> CronSpec:
    """spec with the CRD's defaults (a stored object has them; an older one may not)."""
    policy = str(spec.get("concurrencyPolicy") or "Allow")
    catch_up = str(spec.get("catchUpPolicy") or "Latest")
    if (catch_up, policy) == ("All", "Replace"):
        # Refused by the CRD (each missed run would delete the one before it); an object
        # stored before that rule catches up as a CronJob does, the latest run only.
        catch_up = "Latest"
    success = _int(spec.get("successfulJobsHistoryLimit"))
    failed = _int(spec.get("failedJobsHistoryLimit"))
    return CronSpec(
        schedule=str(spec.get("schedule") or ""),
        time_zone=spec.get("timeZone") if isinstance(spec.get("timeZone"), str) else None,
        starting_deadline_seconds=_int(spec.get("startingDeadlineSeconds")),
        concurrency_policy=policy,
        suspend=spec.get("suspend") is True,
        successful_jobs_history_limit=3 if success is None else success,
        failed_jobs_history_limit=1 if failed is None else failed,
        catch_up=catch_up,
        max_active=_int(spec.get("maxActiveJobs")),
    )


def parse_cron_status(status: Mapping[str, Any]) -> CronStatus:
    active = tuple(
        ActiveRef(str(ref.get("name") or ""), str(ref.get("uid") or ""))
        for ref in (status.get("active") or ())
        if isinstance(ref, Mapping)
    )
    trigger = status.get("lastTrigger")
    return CronStatus(
        active=active,
        last_schedule_time=parse_time(status.get("lastScheduleTime")),
        last_successful_time=parse_time(status.get("lastSuccessfulTime")),
        next_schedule_time=parse_time(status.get("nextScheduleTime")),
        last_missed_time=parse_time(status.get("lastMissedTime")),
        last_trigger=trigger if isinstance(trigger, str) else None,
    )


def cron_owner_uid(meta: Mapping[str, Any]) -> str | None:
    """The uid of the ParallelCronJob that controls a ParallelJob, from its controller
    reference (None: none)."""
    for ref in meta.get("ownerReferences") or ():
        if (
            isinstance(ref, Mapping)
            and ref.get("controller") is True
            and ref.get("kind") == CRON_KIND
            and str(ref.get("apiVersion", "")).startswith(f"{c.GROUP}/")
        ):
            return str(ref.get("uid") or "") or None
    return None


def child_job(body: Mapping[str, Any]) -> ChildJob:
    """A ParallelJob as the cron decision reads it: finished (util.IsJobFinished) and
    when (the TTL controller's jobFinishTime), started, scheduled."""
    meta = as_dict(body.get("metadata"))
    status = parse_status(as_dict(body.get("status")))
    finish_time = job_finish_time(status)
    complete = has_true_condition(status.conditions, c.COND_COMPLETE)
    annotations = as_dict(meta.get("annotations"))
    return ChildJob(
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        finished=(c.COND_COMPLETE if complete else c.COND_FAILED) if is_finished(status) else None,
        finish_time=finish_time,
        start_time=status.start_time,
        scheduled_time=parse_time(annotations.get(SCHEDULED_TIMESTAMP_ANNOTATION)),
        deleting=meta.get("deletionTimestamp") is not None,
    )


def cron_input(
    body: Mapping[str, Any],
    children: tuple[ChildJob, ...],
    now: datetime,
    leading_since: datetime,
) -> CronInput:
    meta = as_dict(body.get("metadata"))
    trigger = as_dict(meta.get("annotations")).get(TRIGGER_ANNOTATION)
    return CronInput(
        name=str(meta.get("name") or ""),
        creation_timestamp=parse_time(meta.get("creationTimestamp")) or now,
        deleting=meta.get("deletionTimestamp") is not None,
        spec=parse_cron_spec(as_dict(body.get("spec"))),
        status=parse_cron_status(as_dict(body.get("status"))),
        children=children,
        now=now,
        leading_since=leading_since,
        trigger=trigger if isinstance(trigger, str) and trigger else None,
    )


def _time(value: datetime | None) -> str | None:
    return format_time(value) if value is not None else None


def cron_status_to_dict(status: CronStatus, namespace: str, conditions: list[JsonDict]) -> JsonDict:
    """The status as the body of a merge patch (None clears a field)."""
    return {
        "active": [
            {
                "apiVersion": c.API_VERSION,
                "kind": c.KIND,
                "namespace": namespace,
                "name": ref.name,
                "uid": ref.uid,
            }
            for ref in status.active
        ],
        "activeCount": len(status.active),
        "lastScheduleTime": _time(status.last_schedule_time),
        "lastSuccessfulTime": _time(status.last_successful_time),
        "nextScheduleTime": _time(status.next_schedule_time),
        "lastMissedTime": _time(status.last_missed_time),
        "lastTrigger": status.last_trigger,
        "conditions": conditions or None,
    }


def schedule_conditions(
    stored: list[Any], invalid: tuple[str, str] | None, now: datetime
) -> list[JsonDict]:
    """status.conditions with InvalidSchedule True (``invalid``: its reason and message)
    or False once the schedule can be used again; kept as it was while nothing changed."""
    old = next((x for x in stored if as_dict(x).get("type") == c.COND_INVALID_SCHEDULE), None)
    if invalid is None and old is None:
        return [dict(x) for x in stored]
    status = "True" if invalid is not None else "False"
    reason, message = invalid if invalid is not None else (c.REASON_SCHEDULE_VALID, "")
    if old is not None and (old.get("status"), old.get("reason"), old.get("message", "")) == (
        status,
        reason,
        message,
    ):
        return [dict(x) for x in stored]
    new = {
        "type": c.COND_INVALID_SCHEDULE,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": format_time(now)
        if old is None or old.get("status") != status
        else old.get("lastTransitionTime"),
    }
    return [*(dict(x) for x in stored if x is not old), new]


def build_job(cron: Mapping[str, Any], create: JobToCreate) -> JsonDict:
    """getJobFromTemplate2: the jobTemplate's labels, annotations and spec, the name, the
    scheduled-timestamp annotation (none for a triggered job) and the controller
    reference (blockOwnerDeletion, as upstream)."""
    meta = as_dict(cron.get("metadata"))
    spec = as_dict(cron.get("spec"))
    template = as_dict(spec.get("jobTemplate"))
    tmeta = as_dict(template.get("metadata"))
    annotations = dict(as_dict(tmeta.get("annotations")))
    if create.scheduled_time is not None:
        annotations[SCHEDULED_TIMESTAMP_ANNOTATION] = scheduled_timestamp_annotation(
            create.scheduled_time, parse_cron_spec(spec).time_zone
        )
    job_meta: JsonDict = {
        "name": create.name,
        "namespace": meta.get("namespace"),
        "labels": dict(as_dict(tmeta.get("labels"))),
        "annotations": annotations,
        "ownerReferences": [
            {
                "apiVersion": c.API_VERSION,
                "kind": CRON_KIND,
                "name": meta.get("name"),
                "uid": meta.get("uid"),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "metadata": job_meta,
        "spec": copy.deepcopy(dict(as_dict(template.get("spec")))),
    }
