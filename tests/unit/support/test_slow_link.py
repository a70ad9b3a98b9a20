"""The relay of the slow-link chaos test (tests/support/slow_link.py): it passes bytes
both ways, holds each chunk once told to, and its iptables chain is one that
hack/cluster-down.sh removes."""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.slow_link import CHAIN, SlowRelay

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def echo() -> Iterator[tuple[str, int]]:
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                while data := conn.recv(4096):
                    conn.sendall(data)

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()
    server.close()


def _round_trip(relay: SlowRelay, payload: bytes) -> tuple[bytes, float]:
    with socket.create_connection(("127.0.0.1", relay.port), timeout=10) as conn:
        started = time.monotonic()
        conn.sendall(payload)
        got = b""
        while len(got) < len(payload):
            got += conn.recv(4096)
        return got, time.monotonic() - started


def test_the_relay_passes_bytes_both_ways_then_holds_each_chunk(echo: tuple[str, int]) -> None:
    with SlowRelay("127.0.0.1", echo) as relay:
        assert _round_trip(relay, b"ping")[0] == b"ping"
        assert relay.held == 0
        relay.delay = 0.3
        got, took = _round_trip(relay, b"pong")
        assert got == b"pong"
        assert took >= 0.6, "held once on the way there, once on the way back"
        assert relay.held == 2
        assert relay.accepted == 2


def test_cluster_down_removes_the_chain() -> None:
    env = (REPO / "hack" / "cluster-env.sh").read_text()
    assert re.search(rf"^IPT_TEST_CHAIN={re.escape(CHAIN)}$", env, re.M)
    assert '"$IPT_TEST_CHAIN"' in (REPO / "hack" / "cluster-down.sh").read_text()
