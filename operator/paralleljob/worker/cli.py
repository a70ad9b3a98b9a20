"""``paralleljob-worker``: run COMMAND once per item of a Redis-stream work queue, or fill one.

    paralleljob-worker --redis URL --stream NAME [options] -- COMMAND...
    paralleljob-worker enqueue --redis URL --stream NAME [FILE|-]

Exit status: 0 once the queue is drained (no undelivered item, none pending anywhere);
1 when Redis stayed unreachable or answered with an error, or COMMAND could not be started,
with one line on stderr; 2 for a usage error; 128+N when signal N (SIGTERM: 143, SIGINT: 130)
stopped the worker, so that a stopped pod never reads as "the work is done".
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import BinaryIO, TypeVar

import redis

from .command import run_command
from .podcost import BUSY_COST, IDLE_COST, DeletionCost, from_environment
from .queue import DEFAULT_GROUP, Item, Queue, QueueUnavailable, connect, enqueue, with_retry

PROG = "paralleljob-worker"
# Under Kubernetes' default terminationGracePeriodSeconds (30), leaving time to hand the item
# back and exit before the kubelet's SIGKILL.
DEFAULT_GRACE_SECONDS = 25.0
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

log = logging.getLogger(PROG)

N = TypeVar("N", int, float)


class WorkerError(Exception):
    """The worker cannot go on; the message is one line."""


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format=f"{PROG}: %(message)s", stream=sys.stderr)
    try:
        if args[:1] == ["enqueue"]:
            return _enqueue(parse_enqueue_args(args[1:]))
        return _work(parse_work_args(args))
    except (WorkerError, QueueUnavailable, redis.RedisError) as err:
        print(f"{PROG}: error: {' '.join(str(err).split())}", file=sys.stderr)
        return 1


def parse_work_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=PROG,
        usage=f"{PROG} --redis URL --stream NAME [options] -- COMMAND...",
        description="Run COMMAND once per item of a Redis stream (item on stdin and in "
        "$PJ_ITEM); exit 0 once the queue is drained.",
        epilog=f"To fill the queue: {PROG} enqueue --help",
    )
    _add_redis_args(parser)
    parser.add_argument("--group", default=DEFAULT_GROUP, help=f"default {DEFAULT_GROUP}")
    parser.add_argument(
        "--visibility-timeout",
        type=_positive(float),
        default=60.0,
        metavar="S",
        help="reclaim an item a dead worker left pending this long (default 60)",
    )
    parser.add_argument(
        "--max-deliveries",
        type=_positive(int),
        default=3,
        metavar="N",
        help="dead-letter an item delivered more than N times (default 3)",
    )
    parser.add_argument(
        "--grace-seconds",
        type=_positive(float),
        default=DEFAULT_GRACE_SECONDS,
        metavar="S",
        help="after SIGTERM, let COMMAND finish this long, then kill it "
        f"(default {DEFAULT_GRACE_SECONDS:g})",
    )
    parser.add_argument(
        "--deletion-cost",
        action="store_true",
        help="mark this pod's controller.kubernetes.io/pod-deletion-cost "
        f"{IDLE_COST} while waiting for an item and {BUSY_COST} while COMMAND runs, so that "
        "a scale-down stops idle workers first (needs POD_NAME and POD_NAMESPACE from the "
        "downward API, and RBAC to get and patch pods; a failed patch only logs a line)",
    )
    options, command = _split_command(argv)
    args = parser.parse_args(options)
    if not command:
        parser.error("COMMAND missing: give it after --")
    args.command = command
    return args


def parse_enqueue_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=f"{PROG} enqueue",
        description="Add one item per line of FILE (or stdin) to the stream. Only \\n ends a "
        "line; every other byte is kept; empty lines are skipped.",
    )
    _add_redis_args(parser)
    parser.add_argument("file", nargs="?", default="-", metavar="FILE", help="default: stdin")
    return parser.parse_args(argv)


def _add_redis_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--redis", required=True, metavar="URL", help="e.g. redis://redis:6379/0")
    parser.add_argument("--stream", required=True, metavar="NAME")
    parser.add_argument(
        "--retry-seconds",
        type=_positive(float),
        default=60.0,
        metavar="S",
        help="give up when Redis has been unreachable this long (default 60)",
    )


def _split_command(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    # Split by hand: argparse would take COMMAND's own options for the worker's.
    argv = list(argv)
    if "--" not in argv:
        return argv, []
    split = argv.index("--")
    return argv[:split], argv[split + 1 :]


def _positive(kind: Callable[[str], N]) -> Callable[[str], N]:
    def parse(text: str) -> N:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, not {text}")
        return value

    return parse


def consumer_name() -> str:
    """The pod's name: unique among the workers, and kept by a restarted container."""
    return os.environ.get("POD_NAME") or os.environ.get("HOSTNAME") or socket.gethostname()


def _connect(url: str) -> redis.Redis:
    try:
        return connect(url)
    except ValueError as err:
        raise WorkerError(f"--redis {_redacted(url)}: {err}") from err


def _redacted(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    return scheme + sep + rest.rpartition("@")[2] if sep else url


def _enqueue(args: argparse.Namespace) -> int:
    client = _connect(args.redis)
    with_retry(client.ping, args.retry_seconds)
    try:
        with _open_input(args.file) as lines:
            added = enqueue(client, args.stream, _items(lines))
    except OSError as err:
        raise WorkerError(f"{args.file}: {err.strerror or err}") from err
    log.info("enqueued %d items to %s", added, args.stream)
    return 0


def _open_input(path: str) -> contextlib.AbstractContextManager[BinaryIO]:
    if path == "-":
        return contextlib.nullcontext(sys.stdin.buffer)
    return open(path, "rb")


def _items(lines: BinaryIO) -> Iterator[bytes]:
    for line in lines:
        if item := line.removesuffix(b"\n"):
            yield item


def _work(args: argparse.Namespace) -> int:
    queue = Queue(
        _connect(args.redis),
        args.stream,
        consumer=consumer_name(),
        group=args.group,
        visibility_timeout=args.visibility_timeout,
        max_deliveries=args.max_deliveries,
        retry_budget=args.retry_seconds,
    )
    received = _stop_on_signals(queue)
    cost: DeletionCost | None = from_environment() if args.deletion_cost else None
    idle = None if cost is None else cost.idle
    with queue:
        log.info("consumer %s of group %s on stream %s", queue.consumer, args.group, args.stream)
        while (item := queue.take(idle)) is not None:
            if cost is not None:
                cost.busy()
            if not _process(args.command, args.grace_seconds, queue, item):
                break
    if received:
        log.info("stopped by %s: not counted as done", _signal_name(received[0]))
        return 128 + received[0]
    log.info("queue %s drained", args.stream)
    return 0


def _stop_on_signals(queue: Queue) -> list[int]:
    """Makes SIGTERM and SIGINT stop ``queue``; the returned list gets the signals received."""
    received: list[int] = []

    def handle(signum: int, _frame: object) -> None:
        # Only record and flag: the main loop logs and winds down in its own time.
        received.append(signum)
        queue.stop()

    for sig in STOP_SIGNALS:
        signal.signal(sig, handle)
    return received


def _process(command: Sequence[str], grace: float, queue: Queue, item: Item) -> bool:
    """Runs COMMAND for ``item`` and settles it; False if it was killed after the grace period."""
    if b"\0" in item.data:
        queue.fail(item, "the item has a NUL byte, which $PJ_ITEM cannot carry")
        return True
    started = time.monotonic()
    try:
        status = run_command(command, item, lambda: queue.stopped, grace)
    except OSError as err:
        raise WorkerError(f"cannot run {command[0]}: {err.strerror or err}") from err
    took = time.monotonic() - started
    if status is None:
        log.info("item %s: COMMAND killed after the %gs grace period; left pending", item.id, grace)
        return False
    if status == 0:
        queue.ack(item)
        log.info("item %s done in %.1fs (delivery %d)", item.id, took, item.deliveries)
    else:
        queue.fail(item, _failure(status))
    return True


def _failure(status: int) -> str:
    if status < 0:
        return f"COMMAND killed by {_signal_name(-status)}"
    return f"COMMAND exited with status {status}"


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:  # a real-time signal Python has no name for
        return f"signal {signum}"
