"""``paralleljob-worker --deletion-cost``: what cost when, the patch it sends, and that a
failing API server never stops the work."""

from __future__ import annotations

import json
import logging
import signal
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
import redis

from paralleljob import constants as c
from paralleljob.worker import cli, enqueue, podcost
from paralleljob.worker.podcost import (
    BUSY_COST,
    IDLE_COST,
    DeletionCost,
    PodRef,
    http_send,
    patch_body,
    pod_path,
    pod_ref,
)

from .conftest import STREAM, StartWorker, pending


def test_idle_is_below_an_unmarked_pod_and_busy_above() -> None:
    """An unmarked pod's cost is 0: an idle worker goes before it, a busy one after."""
    assert IDLE_COST < 0 < BUSY_COST


def test_the_patch_sets_the_annotation_as_a_string() -> None:
    assert json.loads(patch_body(-100)) == {
        "metadata": {"annotations": {c.POD_DELETION_COST: "-100"}}
    }
    assert json.loads(patch_body(BUSY_COST))["metadata"]["annotations"] == {
        "controller.kubernetes.io/pod-deletion-cost": "100"
    }


def test_pod_path_quotes_its_parts() -> None:
    assert pod_path("ns", "w-abc") == "/api/v1/namespaces/ns/pods/w-abc"
    assert pod_path("ns", "a/b") == "/api/v1/namespaces/ns/pods/a%2Fb"


def test_the_pod_from_the_downward_api() -> None:
    env = {
        "POD_NAME": "w-1",
        "POD_NAMESPACE": "jobs",
        "KUBERNETES_SERVICE_HOST": "10.96.0.1",
        "KUBERNETES_SERVICE_PORT": "443",
    }
    assert pod_ref(env) == PodRef("jobs", "w-1", "https://10.96.0.1:443")
    assert pod_ref({**env, "KUBERNETES_SERVICE_HOST": "fd00::1"}) == PodRef(
        "jobs", "w-1", "https://[fd00::1]:443"
    )
    assert pod_ref({**env, "POD_NAME": ""}) is None
    assert pod_ref({k: v for k, v in env.items() if not k.startswith("KUBERNETES")}) is None


def test_a_cost_is_patched_only_when_it_changes() -> None:
    sent: list[int] = []
    marker = DeletionCost(sent.append)
    marker.busy()
    marker.busy()
    marker.idle()
    marker.idle()
    marker.busy()
    assert sent == [BUSY_COST, IDLE_COST, BUSY_COST]
    assert marker.current == BUSY_COST


def test_a_failing_api_logs_one_line_per_run_of_failures(caplog: pytest.LogCaptureFixture) -> None:
    sent: list[int] = []
    failing = [True]

    def send(value: int) -> None:
        if failing[0]:
            raise OSError("connection refused")
        sent.append(value)

    marker = DeletionCost(send, " of pod ns/w")
    with caplog.at_level(logging.INFO):
        marker.busy()
        marker.idle()
        marker.busy()
        assert marker.current is None and sent == []
        failing[0] = False
        marker.idle()
        marker.busy()
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2, messages
    assert "cannot set controller.kubernetes.io/pod-deletion-cost of pod ns/w to 100" in messages[0]
    assert "going on without it" in messages[0] and "connection refused" in messages[0]
    assert "set again" in messages[1]
    assert sent == [IDLE_COST, BUSY_COST]


class _FakePods(BaseHTTPRequestHandler):
    """Answers PATCH like the API server: 200, or the status set on the server."""

    def do_PATCH(self) -> None:
        server: Any = self.server
        length = int(self.headers["Content-Length"])
        server.requests.append((self.path, dict(self.headers), self.rfile.read(length)))
        status, message = server.answer
        body = json.dumps({"kind": "Status", "message": message} if message else {}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def fake_api() -> Iterator[Any]:
    server: Any = HTTPServer(("127.0.0.1", 0), _FakePods)
    server.requests = []
    server.answer = (200, "")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_http_send_patches_the_pod_with_the_token(fake_api: Any, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    port = fake_api.server_address[1]
    ref = PodRef("jobs", "w-1", f"http://127.0.0.1:{port}", token_file=str(token))
    http_send(ref)(IDLE_COST)
    [(path, headers, body)] = fake_api.requests
    assert path == "/api/v1/namespaces/jobs/pods/w-1"
    assert headers["Content-Type"] == "application/merge-patch+json"
    assert headers["Authorization"] == "Bearer s3cret"
    assert body == patch_body(IDLE_COST)


def test_a_forbidden_patch_is_one_line_and_the_cost_unknown(
    fake_api: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fake_api.answer = (403, 'pods "w-1" is forbidden: cannot patch resource "pods"')
    port = fake_api.server_address[1]
    ref = PodRef("jobs", "w-1", f"http://127.0.0.1:{port}", token_file=str(tmp_path / "none"))
    marker = DeletionCost(http_send(ref))
    with caplog.at_level(logging.INFO):
        marker.busy()
        marker.idle()
    assert marker.current is None
    [line] = [r.getMessage() for r in caplog.records]
    assert 'HTTP 403: pods "w-1" is forbidden' in line
    assert len(fake_api.requests) == 2


@pytest.fixture(autouse=True)
def _signal_handlers() -> Iterator[None]:
    """cli.main run in the test process installs its own: put pytest's back."""
    saved = {sig: signal.getsignal(sig) for sig in cli.STOP_SIGNALS}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def test_the_worker_is_busy_while_it_works_and_idle_once_it_waits(
    monkeypatch: pytest.MonkeyPatch, client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    """In the worker's loop: busy when it takes an item, still busy while items follow
    one another (no patch between them), idle once a read finds nothing."""
    enqueue(client, STREAM, [b"a", b"b", b"c"])
    sent: list[int] = []
    seen = tmp_path / "seen"

    def send(value: int) -> None:
        sent.append(value)
        seen.write_text(str(value))

    monkeypatch.setattr(cli, "from_environment", lambda: DeletionCost(send))
    command = ["sh", "-c", f"cat {seen} >> {tmp_path / 'during'}; echo >> {tmp_path / 'during'}"]
    args = ["--redis", redis_url, "--stream", STREAM, "--deletion-cost", "--", *command]
    assert cli.main(args) == 0
    assert sent == [BUSY_COST, IDLE_COST]
    assert (tmp_path / "during").read_text().split() == [str(BUSY_COST)] * 3
    assert pending(client) == 0


def test_without_the_flag_the_pod_is_left_alone(
    monkeypatch: pytest.MonkeyPatch, client: redis.Redis, redis_url: str
) -> None:
    enqueue(client, STREAM, [b"a"])
    monkeypatch.setattr(cli, "from_environment", lambda: pytest.fail("no --deletion-cost"))
    assert cli.main(["--redis", redis_url, "--stream", STREAM, "--", "true"]) == 0


def test_outside_a_pod_the_flag_logs_one_line_and_the_work_goes_on(
    start_worker: StartWorker, client: redis.Redis
) -> None:
    """The console script with --deletion-cost and no in-cluster API server."""
    enqueue(client, STREAM, [b"a", b"b"])
    worker = start_worker("w1", ["true"], "--deletion-cost")
    assert worker.wait() == 0, worker.stderr()
    assert worker.stderr().count("--deletion-cost:") == 1
    assert worker.stderr().count(" done in ") == 2
    assert pending(client) == 0


def test_from_environment_needs_the_pod_and_the_api(monkeypatch: pytest.MonkeyPatch) -> None:
    assert podcost.from_environment({"POD_NAME": "w"}) is None
    env = {"POD_NAME": "w", "POD_NAMESPACE": "ns", "KUBERNETES_SERVICE_HOST": "10.0.0.1"}
    monkeypatch.setattr(podcost, "SERVICE_ACCOUNT", "/nonexistent")
    # No CA file where the service account is mounted: left alone, not an error.
    monkeypatch.setattr(podcost, "PodRef", _ref_without_files)
    assert podcost.from_environment(env) is None


def _ref_without_files(namespace: str, name: str, server: str) -> PodRef:
    return PodRef(namespace, name, server, "/nonexistent/token", "/nonexistent/ca.crt")
