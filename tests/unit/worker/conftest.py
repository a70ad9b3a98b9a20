"""A real redis-server for the worker's tests, and workers run as their console script.

The server is Debian's ``/usr/bin/redis-server`` (``make prereqs`` installs it), one per
session, on a free loopback port and in a temporary directory, without persistence; each test
starts on an empty database.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import pytest
import redis

from tests.support.wait import wait_until

REDIS_SERVER = Path("/usr/bin/redis-server")
WORKER = Path(sys.executable).parent / "paralleljob-worker"
STREAM = "jobs"


# An entry as the tests' clients see it: without decode_responses everything is bytes.
Entry = tuple[bytes, dict[bytes, bytes]]


def entries(client: redis.Redis, key: str = STREAM) -> list[Entry]:
    return cast(list[Entry], client.xrange(key))


def dead_letters(client: redis.Redis) -> list[dict[bytes, bytes]]:
    return [fields for _, fields in entries(client, STREAM + ":dead")]


def pending(client: redis.Redis) -> int:
    return int(client.xpending(STREAM, "workers")["pending"])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _answers(client: redis.Redis, server: subprocess.Popen[bytes], log: Path) -> bool:
    if server.poll() is not None:
        pytest.fail(f"redis-server exited with {server.returncode}:\n{log.read_text()}")
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a redis-server that this fixture started and stops."""
    if not REDIS_SERVER.exists():
        pytest.fail(f"{REDIS_SERVER} is missing: `make prereqs` installs it")
    workdir = tmp_path_factory.mktemp("redis")
    log = workdir / "redis.log"
    port = free_port()
    args = ["--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    with log.open("wb") as out:
        server = subprocess.Popen(
            [str(REDIS_SERVER), *args, "--dir", str(workdir)], stdout=out, stderr=subprocess.STDOUT
        )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        with redis.Redis.from_url(url) as client:
            wait_until(
                lambda: _answers(client, server, log), timeout=10, what="redis-server to answer"
            )
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture
def redis_url(redis_server: str) -> str:
    with redis.Redis.from_url(redis_server) as client:
        client.flushall()
    return redis_server


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    with redis.Redis.from_url(redis_url) as client:
        yield client


@dataclass
class Worker:
    """A ``paralleljob-worker`` process; its stderr goes to a file read after it ends."""

    proc: subprocess.Popen[bytes]
    stderr_path: Path

    def wait(self, timeout: float = 15) -> int:
        return self.proc.wait(timeout=timeout)

    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def signal(self, signum: signal.Signals) -> None:
        self.proc.send_signal(signum)


StartWorker = Callable[..., Worker]


@pytest.fixture
def start_worker(redis_url: str, tmp_path: Path) -> Iterator[StartWorker]:
    """Starts ``paralleljob-worker ARGS...`` as consumer ``name``; kills what is left at the end.

    Without ``args`` it runs on the test's Redis and STREAM, with ``command`` after ``--``.
    """
    started: list[Worker] = []

    def start(
        name: str,
        command: Sequence[str] = (),
        *flags: str,
        args: Sequence[str] | None = None,
        stdin: bytes | None = None,
    ) -> Worker:
        if args is None:
            args = ["--redis", redis_url, "--stream", STREAM, *flags, "--", *command]
        stderr_path = tmp_path / f"{name}.stderr"
        env = {**os.environ, "POD_NAME": name, "OUT": str(tmp_path)}
        with stderr_path.open("wb") as err:
            proc = subprocess.Popen(
                [str(WORKER), *args],
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stderr=err,
                env=env,
                cwd=tmp_path,
            )
        if stdin is not None:
            assert proc.stdin is not None
            proc.stdin.write(stdin)
            proc.stdin.close()
        worker = Worker(proc, stderr_path)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        if worker.proc.poll() is None:
            worker.proc.kill()
            worker.proc.wait()
