"""``paralleljob-worker`` run as its console script against a real redis-server."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import redis

from paralleljob.worker import enqueue
from paralleljob.worker.cli import parse_work_args
from tests.support.wait import wait_until

from .conftest import STREAM, StartWorker, dead_letters, entries, free_port, pending

#: How long a worker process may take to start and take its first item: its interpreter
#: and imports, on a machine that also runs the cluster and two other test workers.
STARTUP = 30

# Items a shell or a careless split would change: spaces at both ends, tabs, quotes,
# backslashes, glob and variable syntax, a lone \r, non-UTF-8 bytes.
AWKWARD = [
    b"  leading and trailing  ",
    b"tab\there",
    b"quotes ' \" and \\ backslash",
    b"$HOME * ? [a] $(echo no)",
    b"carriage\rreturn",
    b"caf\xc3\xa9 \xff\xfe",
    b"-n",
]
# Records the item as COMMAND sees it on stdin and in $PJ_ITEM, under its entry id.
RECORD = [
    "sh",
    "-c",
    'cat > "$OUT/$PJ_ITEM_ID.stdin"; printf %s "$PJ_ITEM" > "$OUT/$PJ_ITEM_ID.env"',
]
# Marks that it started, waits for the test's go-ahead, marks that it finished.
WAIT_FOR_GO = [
    "sh",
    "-c",
    'echo "$PJ_ITEM" >> "$OUT/started"; '
    'while [ ! -e "$OUT/go" ]; do sleep 0.05; done; echo "$PJ_ITEM" >> "$OUT/finished"',
]


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def calls(client: redis.Redis, command: str) -> int:
    """How often the server has run ``command`` (lowercase), from scripts too."""
    stats = client.info("commandstats").get(f"cmdstat_{command}", {})
    return int(stats.get("calls", 0))


def holder(client: redis.Redis) -> tuple[bytes, int] | None:
    """The consumer of the one pending entry and its deliveries; None if none is pending."""
    entries = client.xpending_range(STREAM, "workers", "-", "+", 10)
    if not entries:
        return None
    [entry] = entries
    consumer = entry["consumer"]
    assert isinstance(consumer, bytes)
    return consumer, int(entry["times_delivered"])


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("paralleljob-worker: error:")]


def test_enqueue_from_a_file_and_each_item_reaches_command_unchanged(
    start_worker: StartWorker, redis_url: str, client: redis.Redis, tmp_path: Path
) -> None:
    items_file = tmp_path / "items"
    items_file.write_bytes(b"\n".join(AWKWARD) + b"\n")
    producer = ["enqueue", "--redis", redis_url, "--stream", STREAM, str(items_file)]
    assert start_worker("producer", args=producer).wait() == 0

    worker = start_worker("w1", RECORD)
    assert worker.wait() == 0, worker.stderr()
    added = entries(client)
    assert [fields[b"item"] for _, fields in added] == AWKWARD
    for entry_id, fields in added:
        assert (tmp_path / f"{entry_id.decode()}.stdin").read_bytes() == fields[b"item"]
        assert (tmp_path / f"{entry_id.decode()}.env").read_bytes() == fields[b"item"]
    assert pending(client) == 0
    assert worker.stderr().count(" done in ") == len(AWKWARD)
    assert "drained" in worker.stderr()


def test_enqueue_from_stdin_one_item_per_line(
    start_worker: StartWorker, redis_url: str, client: redis.Redis
) -> None:
    text = b" one \n\ntwo  two\nlast line without newline"
    producer = ["enqueue", "--redis", redis_url, "--stream", STREAM, "-"]
    assert start_worker("producer", args=producer, stdin=text).wait() == 0
    items = [fields[b"item"] for _, fields in entries(client)]
    assert items == [b" one ", b"two  two", b"last line without newline"]


def test_a_failed_item_is_dead_lettered_and_the_job_still_ends_well(
    start_worker: StartWorker, client: redis.Redis
) -> None:
    enqueue(client, STREAM, [b"ok", b"bad", b"a\0b", b"ok too"])
    ids = [entry_id for entry_id, _ in entries(client)]
    worker = start_worker("w1", ["sh", "-c", 'test "$PJ_ITEM" != bad'])
    assert worker.wait() == 0, worker.stderr()
    letters = {letter[b"id"]: letter for letter in dead_letters(client)}
    assert letters.keys() == {ids[1], ids[2]}
    assert letters[ids[1]][b"item"] == b"bad"
    assert letters[ids[1]][b"reason"] == b"COMMAND exited with status 1"
    assert letters[ids[1]][b"deliveries"] == b"1"
    assert letters[ids[2]][b"reason"] == b"the item has a NUL byte, which $PJ_ITEM cannot carry"
    assert pending(client) == 0


def test_an_item_a_dead_consumer_left_pending_is_reclaimed_and_done(
    start_worker: StartWorker, client: redis.Redis, tmp_path: Path
) -> None:
    client.xadd(STREAM, {"item": b"orphan"})
    client.xgroup_create(STREAM, "workers", id="0")
    client.xreadgroup("workers", "dead-pod", {STREAM: ">"})  # read, never acked
    worker = start_worker("w1", WAIT_FOR_GO, "--visibility-timeout", "1")
    (tmp_path / "go").touch()
    assert worker.wait() == 0, worker.stderr()
    assert lines(tmp_path / "finished") == ["orphan"]
    assert "(delivery 2)" in worker.stderr()
    assert pending(client) == 0


def test_workers_exit_only_once_nothing_is_pending_anywhere(
    start_worker: StartWorker, client: redis.Redis, tmp_path: Path
) -> None:
    client.xadd(STREAM, {"item": b"slow"})
    busy = start_worker("busy", WAIT_FOR_GO, "--visibility-timeout", "0.5")
    wait_until(lambda: lines(tmp_path / "started"), timeout=STARTUP, what="the item to start")
    # From here on only the idle worker reclaims (busy runs its command) and only busy's
    # heartbeat claims (XCLAIM ... JUSTID, in its script).
    reclaims, renewals = calls(client, "xautoclaim"), calls(client, "xclaim")
    idle = start_worker("idle", WAIT_FOR_GO, "--visibility-timeout", "0.5")
    # The queue has no undelivered item, but one is pending: the idle worker must wait and,
    # as the busy one renews its lease, not reclaim it, for several visibility timeouts. It
    # tries once a round, and each round's XREADGROUP blocks 1 s: three tries span at least
    # 2 s, four visibility timeouts.
    wait_until(
        lambda: (
            calls(client, "xautoclaim") - reclaims >= 3
            or holder(client) != (b"busy", 1)
            or idle.proc.poll() is not None
        ),
        timeout=20,
        what="the idle worker to try three times to reclaim the pending item",
    )
    assert holder(client) == (b"busy", 1), "reclaimed from a live worker"
    assert idle.proc.poll() is None, idle.stderr()
    assert calls(client, "xclaim") - renewals >= 6, "busy renewed its lease every 1/3 timeout"
    (tmp_path / "go").touch()
    assert busy.wait() == 0, busy.stderr()
    assert idle.wait() == 0, idle.stderr()
    assert lines(tmp_path / "started") == ["slow"]
    assert pending(client) == 0


def test_sigterm_kills_a_long_command_after_the_grace_period_and_leaves_its_item(
    start_worker: StartWorker, client: redis.Redis, tmp_path: Path
) -> None:
    client.xadd(STREAM, {"item": b"long"})
    stopped = start_worker("stopped", WAIT_FOR_GO, "--grace-seconds", "0.5")
    wait_until(lambda: lines(tmp_path / "started"), timeout=STARTUP, what="the item to start")
    stopped.signal(signal.SIGTERM)
    assert stopped.wait() == 128 + signal.SIGTERM
    assert "stopped by SIGTERM" in stopped.stderr()
    assert pending(client) == 1
    assert dead_letters(client) == []
    # Handed back at once, though the next worker's visibility timeout is long; and the
    # killed command's shell did not live on to finish the item too.
    (tmp_path / "go").touch()
    successor = start_worker("successor", WAIT_FOR_GO, "--visibility-timeout", "600")
    assert successor.wait() == 0, successor.stderr()
    assert lines(tmp_path / "finished") == ["long"]
    assert pending(client) == 0


def test_sigterm_lets_a_command_finish_within_the_grace_period(
    start_worker: StartWorker, client: redis.Redis, tmp_path: Path
) -> None:
    client.xadd(STREAM, {"item": b"first"})
    client.xadd(STREAM, {"item": b"second"})
    worker = start_worker("w1", WAIT_FOR_GO, "--grace-seconds", "20")
    wait_until(lambda: lines(tmp_path / "started"), timeout=STARTUP, what="the item to start")
    worker.signal(signal.SIGTERM)
    wait_until(lambda: "grace period" in worker.stderr(), timeout=10, what="SIGTERM to be seen")
    (tmp_path / "go").touch()
    # Finished and acked, but the worker takes no next item and does not claim "done".
    assert worker.wait() == 128 + signal.SIGTERM
    assert lines(tmp_path / "finished") == ["first"]
    assert client.xinfo_groups(STREAM)[0]["pending"] == 0
    assert client.xinfo_groups(STREAM)[0]["lag"] == 1


@pytest.mark.parametrize("mode", [["--", "true"], ["enqueue"]], ids=["worker", "enqueue"])
def test_redis_unreachable_fails_with_one_line_within_the_retry_budget(
    start_worker: StartWorker, mode: list[str]
) -> None:
    # Nothing listens there: the port was free a moment ago and no one took it since.
    url = f"redis://127.0.0.1:{free_port()}/0"
    options = ["--redis", url, "--stream", STREAM, "--retry-seconds", "1"]
    worker = start_worker("w1", args=[*options, *mode] if mode[0] == "--" else [*mode, *options])
    # It gives up: the wait's deadline (not a measured duration) is the budget's bound.
    assert worker.wait(timeout=8) == 1
    [line] = error_lines(worker.stderr())
    assert line.startswith("paralleljob-worker: error: Redis unreachable for 1s: ")
    assert "onnection refused" in line


def test_a_command_that_cannot_start_fails_the_worker_and_keeps_the_item(
    start_worker: StartWorker, client: redis.Redis
) -> None:
    client.xadd(STREAM, {"item": b"x"})
    worker = start_worker("w1", ["/nonexistent/command"])
    assert worker.wait() == 1
    assert error_lines(worker.stderr()) == [
        "paralleljob-worker: error: cannot run /nonexistent/command: No such file or directory"
    ]
    assert pending(client) == 1
    assert dead_letters(client) == []


def test_command_is_required_after_a_double_dash(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse_work_args(["--redis", "redis://x", "--stream", "s", "--"])
    assert exit_info.value.code == 2
    assert "COMMAND missing: give it after --" in capsys.readouterr().err
    args = parse_work_args(["--redis", "redis://x", "--stream", "s", "--", "sh", "--stream", "y"])
    assert (args.stream, args.command) == ("s", ["sh", "--stream", "y"])
