"""ParallelCronJobs on the local cluster, with real pods: ParallelJobs started on a
schedule by the operator, across an outage of the operator of several minutes, with each
catch-up policy side by side; a trigger through the annotation; the status the CronJob
lacks (nextScheduleTime, lastMissedTime); validation. Not a CronJob's behaviour:
kubernetes/kubernetes#42649 (catch-up), #47538 (trigger now), #78564 (nextScheduleTime),
#125493 and #138569 (a cap on running jobs)."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import yaml

from paralleljob.core.cron.cron_model import SCHEDULED_TIMESTAMP_ANNOTATION, TRIGGER_ANNOTATION
from tests.support.wait import wait_until

from .conftest import REPO_ROOT as REPO
from .conftest import Operator
from .support import Kubectl, busybox_template

pytestmark = [pytest.mark.realnode]

#: How many minute boundaries the outage spans: 2 in `make test` (the fewest that tell the
#: three policies apart), 5 with `make test-schedule` (OUTAGE_MINUTES).
OUTAGE_MINUTES = int(os.environ.get("PJ_SCHEDULE_OUTAGE_MINUTES", "2"))
POLICIES = ("Latest", "All", "Skip")


def cron(name: str, schedule: str = "* * * * *", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "paralleljob.dev/v1alpha1",
        "kind": "ParallelCronJob",
        "metadata": {"name": name},
        "spec": {
            "schedule": schedule,
            "successfulJobsHistoryLimit": 20,
            "jobTemplate": {
                "metadata": {"labels": {"cron": name}},
                "spec": {"completions": 1, "template": busybox_template("true")},
            },
            **spec,
        },
    }


def apply(k: Kubectl, *objects: dict[str, Any]) -> None:
    k.run("apply", "-f", "-", input=yaml.safe_dump_all(objects))


def jobs_of(k: Kubectl, name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = k.json("get", "pj", "-l", f"cron={name}")["items"]
    return items


def scheduled(job: dict[str, Any]) -> datetime:
    value = job["metadata"]["annotations"][SCHEDULED_TIMESTAMP_ANNOTATION]
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def minutes(k: Kubectl, name: str) -> set[datetime]:
    """The scheduled minutes of the cron job's ParallelJobs."""
    return {scheduled(j) for j in jobs_of(k, name) if j["metadata"].get("annotations")}


def status(k: Kubectl, name: str) -> dict[str, Any]:
    return dict(k.json("get", "pcj", name).get("status") or {})


def _time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def mid_minute() -> datetime | None:
    """Now, when between 15 and 40 s past a minute: far from the schedule's boundaries,
    so that an operator stopped or started then is clearly before or after each one."""
    now = datetime.now(UTC)
    return now if 15 <= now.second < 40 else None


def boundaries(after: datetime, until: datetime) -> set[datetime]:
    """The whole minutes in (after, until]."""
    first = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
    found = set()
    while first <= until:
        found.add(first)
        first += timedelta(minutes=1)
    return found


# Latest and Skip report the minutes they did not run (the test asserts it); All runs them.
@pytest.mark.warnings("MissSchedule")
@pytest.mark.long
def test_each_catch_up_policy_across_an_operator_outage(operator: Operator, k: Kubectl) -> None:
    """Three ParallelCronJobs, every minute, one per policy. Each runs once; the operator is
    stopped for OUTAGE_MINUTES minute boundaries, then started: Latest runs the latest
    missed minute only (a CronJob's behaviour), All every missed minute, Skip none of them;
    each then runs on time again. Every run is one ParallelJob, named by its minute."""
    apply(k, *(cron(f"cj-{p.lower()}", catchUpPolicy=p) for p in POLICIES))
    names = [f"cj-{p.lower()}" for p in POLICIES]
    wait_until(lambda: all(minutes(k, n) for n in names), timeout=150, what="a first run of each")
    before = {n: minutes(k, n) for n in names}
    stopped = wait_until(mid_minute, timeout=60, interval=0.5, what="the middle of a minute")
    operator.kill()
    assert all(minutes(k, n) == before[n] for n in names), "a run slipped in before the kill"

    def outage_over() -> datetime | None:
        now = mid_minute()
        return now if now and len(boundaries(stopped, now)) >= OUTAGE_MINUTES else None

    started = wait_until(
        outage_over, timeout=60 * OUTAGE_MINUTES + 90, interval=0.5, what="the outage's end"
    )
    missed = boundaries(stopped, started)
    operator.start()
    leading = datetime.now(UTC)
    latest, all_, skip = names
    # All: every missed minute, one after another; Latest: the last one only.
    wait_until(lambda: missed <= minutes(k, all_), timeout=90, what="All's missed runs")
    wait_until(lambda: max(missed) in minutes(k, latest), timeout=60, what="Latest's run")
    after = min(boundaries(leading, leading + timedelta(minutes=1)))
    # Each runs on time again at the first minute after the start, Skip included.
    wait_until(
        lambda: all(after in minutes(k, n) for n in names), timeout=150, what="on time again"
    )
    got = {n: minutes(k, n) - before[n] - {after} for n in names}
    assert got[all_] == missed
    assert got[latest] == {max(missed)}
    assert got[skip] == set(), "Skip ran a minute missed in the outage"
    ran = {n: {scheduled(j): j for j in jobs_of(k, n)} for n in names}
    for n in names:
        for minute, job in ran[n].items():
            assert job["metadata"]["name"] == f"{n}-{int(minute.timestamp()) // 60}"
            ref = job["metadata"]["ownerReferences"][0]
            assert (ref["kind"], ref["controller"]) == ("ParallelCronJob", True)
    wait_until(
        lambda: all(
            _time(status(k, n).get("lastScheduleTime")) == after and not status(k, n).get("active")
            for n in names
        ),
        timeout=120,
        what="the runs finished and recorded",
    )
    lost = sorted(missed)
    assert _time(status(k, latest).get("lastMissedTime")) == lost[-2]
    assert _time(status(k, skip).get("lastMissedTime")) == lost[-1]
    assert status(k, all_).get("lastMissedTime") is None
    for n in names:
        s = status(k, n)
        nxt = _time(s.get("nextScheduleTime"))
        assert nxt is not None and nxt.second == 0 and nxt > after, s
        assert _time(s.get("lastSuccessfulTime")) is not None
    events = k.json("get", "events", "--field-selector", "reason=MissSchedule")["items"]
    warned = {e["involvedObject"]["name"] for e in events}
    assert {latest, skip} <= warned and all_ not in warned, warned


@pytest.mark.cluster
def test_a_trigger_starts_one_job_now_even_while_suspended(operator: Operator, k: Kubectl) -> None:
    name = "cj-trigger"
    apply(k, cron(name, schedule="0 0 1 1 *", suspend=True))
    token = str(time.time_ns())
    k.run("annotate", "pcj", name, f"{TRIGGER_ANNOTATION}={token}")
    [job] = wait_until(lambda: jobs_of(k, name) or None, timeout=30, what="the triggered job")
    assert job["metadata"]["name"].startswith(f"{name}-m")
    assert SCHEDULED_TIMESTAMP_ANNOTATION not in (job["metadata"].get("annotations") or {})
    wait_until(lambda: status(k, name).get("lastTrigger") == token, timeout=30, what="lastTrigger")
    wait_until(lambda: k.finished(job["metadata"]["name"]), timeout=90, what="the job done")
    # The same value again starts nothing; a new one starts one more.
    k.run("annotate", "--overwrite", "pcj", name, f"{TRIGGER_ANNOTATION}={token}")
    k.run("annotate", "--overwrite", "pcj", name, f"{TRIGGER_ANNOTATION}={token}-2")
    wait_until(lambda: len(jobs_of(k, name)) == 2, timeout=30, what="a second triggered job")
    wait_until(
        lambda: status(k, name).get("lastTrigger") == f"{token}-2", timeout=30, what="its trigger"
    )
    assert len(jobs_of(k, name)) == 2
    assert status(k, name).get("nextScheduleTime") is None, "suspended: nothing is next"


@pytest.mark.cluster
def test_next_schedule_time_and_the_printed_columns(operator: Operator, k: Kubectl) -> None:
    name = "cj-yearly"
    apply(k, cron(name, schedule="0 9 1 1 *", timeZone="Asia/Tokyo"))

    def nxt() -> datetime | None:
        return _time(status(k, name).get("nextScheduleTime"))

    when = wait_until(nxt, timeout=30, what="status.nextScheduleTime")
    tokyo = when.astimezone(ZoneInfo("Asia/Tokyo"))
    assert (tokyo.month, tokyo.day, tokyo.hour, tokyo.minute) == (1, 1, 9, 0)
    assert when > datetime.now(UTC)
    row = k.run("get", "pcj", name).stdout.splitlines()
    assert row[0].split()[:5] == ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE"], row
    assert row[1].split()[:4] == [name, "0", "9", "1"], row


@pytest.mark.cluster
@pytest.mark.warnings("UnparseableSchedule")
def test_an_unparseable_schedule_is_a_condition_and_an_event(
    operator: Operator, k: Kubectl
) -> None:
    name = "cj-bad"
    apply(k, cron(name, schedule="61 * * * *"))

    def invalid() -> dict[str, Any] | None:
        for cond in status(k, name).get("conditions") or []:
            if cond["type"] == "InvalidSchedule" and cond["status"] == "True":
                return dict(cond)
        return None

    cond = wait_until(invalid, timeout=30, what="the InvalidSchedule condition")
    assert cond["reason"] == "UnparseableSchedule"
    assert "61" in cond["message"]
    k.run("patch", "pcj", name, "--type=merge", "-p", '{"spec":{"schedule":"0 0 1 1 *"}}')
    wait_until(lambda: invalid() is None, timeout=30, what="the condition cleared")
    assert jobs_of(k, name) == []


@pytest.mark.cluster
def test_the_example_is_accepted(crd: None, k: Kubectl) -> None:
    example = REPO / "manifests" / "examples" / "parallelcronjob.yaml"
    k.run("apply", "--dry-run=server", "-f", str(example))


@pytest.mark.cluster
def test_the_api_server_refuses_what_the_crd_can_tell(crd: None, k: Kubectl) -> None:
    cases = [
        (
            {"schedule": "TZ=UTC * * * * *"},
            "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
        ),
        (
            {"concurrencyPolicy": "Forbid", "maxActiveJobs": 2},
            "spec.maxActiveJobs: Forbidden: may only be set with concurrencyPolicy Allow",
        ),
        ({"catchUpPolicy": "Some"}, 'spec.catchUpPolicy: Unsupported value: "Some"'),
        (
            {"catchUpPolicy": "All", "concurrencyPolicy": "Replace"},
            "spec.catchUpPolicy: Forbidden: All may not be used with concurrencyPolicy Replace",
        ),
        (
            {"timeZone": "../etc/passwd"},
            "must be a time zone name from the tz database",
        ),
    ]
    for change, message in cases:
        body = cron("cj-invalid")
        body["spec"].update(change)
        refused = k.run("create", "-f", "-", input=yaml.safe_dump(body), check=False)
        assert refused.returncode != 0, change
        assert message in refused.stderr, (change, refused.stderr)


#: How long the healthy schedules run: 2 minutes in `make test`, the issue's 10 with
#: `make test-schedule` (PJ_SCHEDULE_QUIET_MINUTES).
QUIET_MINUTES = int(os.environ.get("PJ_SCHEDULE_QUIET_MINUTES", "2"))


def _active_names(k: Kubectl, name: str) -> tuple[set[str], set[str]]:
    """What ``status.active`` names and which of the cron job's ParallelJobs run now."""
    listed = status(k, name).get("active") or []
    running = {
        j["metadata"]["name"]
        for j in jobs_of(k, name)
        if not any(
            c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
            for c in (j.get("status") or {}).get("conditions") or []
        )
    }
    return {a["name"] for a in listed}, running


@pytest.mark.long
def test_a_healthy_schedule_is_quiet_and_runs_once_a_minute(operator: Operator, k: Kubectl) -> None:
    """Issue 43: two ParallelCronJobs every minute, Forbid and Replace, a 5 s job each,
    for QUIET_MINUTES minutes: one job per minute each, status.active the job that runs
    (a difference never outlasts the status write that follows a create or a finish),
    and not one Warning Event (it was UnexpectedJob on every run)."""
    names = ("quiet-forbid", "quiet-replace")
    started = wait_until(mid_minute, timeout=60, interval=0.5, what="the middle of a minute")
    apply(
        k,
        *(
            cron(n, concurrencyPolicy=p, jobTemplate=_sleeping(n, 5))
            for n, p in zip(names, ("Forbid", "Replace"), strict=True)
        ),
    )
    end = started.replace(second=30, microsecond=0) + timedelta(minutes=QUIET_MINUTES)
    differs_since: dict[str, float] = {}
    while datetime.now(UTC) < end:
        for name in names:
            active, running = _active_names(k, name)
            if active == running:
                differs_since.pop(name, None)
                continue
            since = differs_since.setdefault(name, time.monotonic())
            assert time.monotonic() - since < 10, f"{name}: active {active}, running {running}"
        time.sleep(1)  # the sampling period, not a synchronisation
    expected = boundaries(started, end)
    for name in names:

        def ran(name: str = name) -> bool:
            return minutes(k, name) >= expected

        wait_until(ran, timeout=30, what=f"{name}'s runs")
        assert minutes(k, name) == expected, f"{name}: one job per minute"
    warnings = k.json("get", "events", "--field-selector", "type=Warning")["items"]
    assert [(w["reason"], w["message"]) for w in warnings] == []


def _sleeping(name: str, seconds: int) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"cron": name}},
        "spec": {"completions": 1, "template": busybox_template(f"sleep {seconds}")},
    }
