"""One pod's link to the API server made slow, on the local cluster (issue 44): netem is
not in this kernel, so the pod's traffic for the API server's Service is DNAT-ed to a TCP
relay of the test's own (:class:`SlowRelay`), which passes it on at once until told to
hold each chunk for ``delay`` seconds before passing it on (and reads the next one only
then): a link whose every request waits behind the ones before it, as on a congested
link or behind a queue.

The pod's connections that existed before the rule are cut (``ss -K`` in the pod's
network namespace: forgetting their conntrack entries is not enough, an idle watch
would wait forever on a connection nothing answers), so that everything it says to
the API server from then on goes through the relay.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

#: A chain of the test's own in the nat table, jumped to first from PREROUTING
#: (hack/cluster-down.sh removes it too, should a test die before its clean-up).
CHAIN = "PJ-TEST-SLOW-LINK"
CHUNK = 64 * 1024


@dataclass
class SlowRelay:
    """A TCP relay from ``listen_host`` (a free port) to ``target``, in a thread of its
    own; ``delay`` (seconds, 0 to pass at once) may change while it runs."""

    listen_host: str
    target: tuple[str, int]
    delay: float = 0.0
    port: int = 0
    #: Connections accepted, and chunks passed on after being held.
    accepted: int = 0
    held: int = 0
    _loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)
    _thread: threading.Thread | None = None
    _server: asyncio.Server | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    _writers: set[asyncio.StreamWriter] = field(default_factory=set)
    _stopping: asyncio.Event = field(default_factory=asyncio.Event)

    def __enter__(self) -> SlowRelay:
        started = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(started,), daemon=True)
        self._thread.start()
        if not started.wait(10):
            raise RuntimeError("the relay did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)

        async def serve() -> None:
            self._server = await asyncio.start_server(self._relay, self.listen_host, 0)
            self.port = self._server.sockets[0].getsockname()[1]
            started.set()

        self._loop.run_until_complete(serve())
        self._loop.run_forever()
        self._loop.close()

    async def _stop(self) -> None:
        """Every connection closed under its pumps, which then end by themselves (a
        cancelled handler would be logged as an error by asyncio's server)."""
        self._stopping.set()
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=10)

    async def _relay(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.accepted += 1
        try:
            server_r, server_w = await asyncio.open_connection(*self.target)
        except OSError:
            client_w.close()
            self._tasks.discard(task)
            return
        self._writers |= {client_w, server_w}
        try:
            await asyncio.gather(self._pump(client_r, server_w), self._pump(server_r, client_w))
        finally:
            for writer in (client_w, server_w):
                writer.close()
                self._writers.discard(writer)
            self._tasks.discard(task)

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        """Passes each chunk on, after holding it ``delay`` seconds if one is set; at the
        source's end (or reset), ends the sink's side."""
        with contextlib.suppress(OSError, RuntimeError):  # RuntimeError: closed under it
            while chunk := await source.read(CHUNK):
                if self.delay > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._stopping.wait(), self.delay)
                    self.held += 1
                if self._stopping.is_set() or sink.is_closing():
                    return
                sink.write(chunk)
                await sink.drain()
            if sink.can_write_eof() and not sink.is_closing():
                sink.write_eof()


def _iptables(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["iptables", "-w", "-t", "nat", *args], capture_output=True, text=True, check=check
    )


def remove_chain() -> None:
    """The chain and the jump to it, if there (idempotent)."""
    while _iptables("-D", "PREROUTING", "-j", CHAIN, check=False).returncode == 0:
        pass
    _iptables("-F", CHAIN, check=False)
    _iptables("-X", CHAIN, check=False)


def pod_pid(pod: str) -> int | None:
    """A process of the pod ``pod`` (its container's environment names it: POD_NAME)."""
    needle = f"POD_NAME={pod}".encode()
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if needle in environ.read_bytes().split(b"\0"):
                return int(environ.parent.name)
        except OSError:
            continue
    return None


def cut_connections(pod: str, address: str) -> None:
    """Ends the pod's TCP connections to ``address``, in its network namespace."""
    pid = pod_pid(pod)
    if pid is not None:
        subprocess.run(
            ["nsenter", "-t", str(pid), "-n", "ss", "-K", "dst", address],
            capture_output=True,
            check=False,
        )


@contextlib.contextmanager
def slow_link(pod: str, pod_ip: str, service: tuple[str, int], relay: SlowRelay) -> Iterator[None]:
    """The pod's traffic for ``service`` (the API server's Service IP and port) goes to
    ``relay``, its existing connections cut; as it was afterwards (and cut again)."""
    remove_chain()
    _iptables("-N", CHAIN)
    _iptables(
        "-A", CHAIN, "-s", pod_ip, "-d", service[0], "-p", "tcp", "--dport", str(service[1]),
        "-j", "DNAT", "--to-destination", f"{relay.listen_host}:{relay.port}",
    )  # fmt: skip
    _iptables("-I", "PREROUTING", "1", "-j", CHAIN)
    cut_connections(pod, service[0])
    try:
        yield
    finally:
        remove_chain()
        cut_connections(pod, service[0])
