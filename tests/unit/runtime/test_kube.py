"""Choosing the client configuration: kubeconfig or service account, quietly."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, cast

import kopf
import pytest
from aiohttp import web
from kubernetes.aio import client as aio_client
from kubernetes.aio.config import incluster_config

from paralleljob import handlers
from paralleljob.cli import StartupError, preflight
from paralleljob.config import OperatorConfig
from paralleljob.runtime.kube import ApiError, ConfigError, Kube, load_configuration
from tests.support.wait import wait_until_async

from ..jobs.support import serving

# kopf's decorators type handlers as its ActivityFn; call them as the plain coroutines.
login = cast(Callable[[], Coroutine[Any, Any, kopf.ConnectionInfo]], handlers.login)


def _kubeconfig(path: Path, server: str, token: str = "t0ken") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: k, cluster: {{server: '{server}'}}}}]\n"
        f"users: [{{name: u, user: {{token: {token}}}}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    return path


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No kubeconfig, no cluster, an empty home; a service account's files ready to use."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(name, raising=False)
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text("sa-token")
    (account / "ca.crt").write_text("not really a certificate")
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(account / "token"))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(account / "ca.crt"))
    return home


def _in_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")


def _load(kubeconfig: str | None = None) -> Any:
    return asyncio.run(load_configuration(kubeconfig))


def test_in_a_pod_the_service_account_is_used_without_a_word(
    env: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _in_cluster(monkeypatch)
    _kubeconfig(env / ".kube" / "config", "https://home.example:6443")  # not consulted
    caplog.set_level(logging.DEBUG)
    assert _load().host == "https://10.96.0.1:443"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


def test_an_explicit_kubeconfig_wins_even_in_a_pod(
    env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _in_cluster(monkeypatch)
    path = _kubeconfig(tmp_path / "kc", "https://named.example:6443")
    monkeypatch.setenv("KUBECONFIG", str(path))
    assert _load().host == "https://named.example:6443"
    monkeypatch.delenv("KUBECONFIG")
    assert _load(str(path)).host == "https://named.example:6443"


def test_outside_a_cluster_the_home_kubeconfig_is_used(env: Path) -> None:
    _kubeconfig(env / ".kube" / "config", "https://home.example:6443")
    assert _load().host == "https://home.example:6443"


def test_a_kubeconfig_path_list_skips_missing_files_quietly(
    env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _kubeconfig(tmp_path / "kc", "https://listed.example:6443")
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'missing'}:{path}")
    caplog.set_level(logging.DEBUG)
    assert _load().host == "https://listed.example:6443"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


def test_nothing_usable_is_one_clear_line(
    env: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(ConfigError) as exc:
        _load()
    assert str(exc.value) == (
        "no ~/.kube/config, no $KUBECONFIG, and not in a cluster "
        "($KUBERNETES_SERVICE_HOST is unset)"
    )
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    monkeypatch.setenv("KUBECONFIG", "/no/such/kubeconfig")
    with pytest.raises(StartupError, match=r"^KUBECONFIG=/no/such/kubeconfig: no such file$"):
        asyncio.run(preflight(OperatorConfig()))


def test_a_broken_service_account_is_one_clear_line(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _in_cluster(monkeypatch)
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", "/no/such/token")
    with pytest.raises(StartupError) as exc:
        asyncio.run(preflight(OperatorConfig()))
    assert str(exc.value) == "in-cluster configuration: Service token file does not exist."


def test_kopf_logs_in_with_the_operators_configuration(
    env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = _kubeconfig(tmp_path / "kc", "https://named.example:6443", token="s3cret")
    monkeypatch.setenv("KUBECONFIG", str(path))
    info = asyncio.run(login())
    assert (info.server, info.scheme, info.token) == (
        "https://named.example:6443",
        "Bearer",
        "s3cret",
    )
    monkeypatch.delenv("KUBECONFIG")
    _in_cluster(monkeypatch)
    info = asyncio.run(login())
    assert info.scheme is not None and info.scheme.lower() == "bearer"
    assert (info.server, info.token) == ("https://10.96.0.1:443", "sa-token")
    assert str(info.ca_path).endswith("ca.crt")


def test_the_client_session_does_not_look_for_netrc_credentials_per_request() -> None:
    """aiohttp with trust_env reads ~/.netrc on a worker thread before each request."""

    async def session_trusts_env() -> bool:
        configuration = aio_client.Configuration()
        configuration.host = "https://127.0.0.1:1"
        kube = Kube(configuration)
        with contextlib.suppress(ApiError):
            await kube.request("GET", "/version", timeout=1)
        session = kube.api.rest_client.pool_manager
        assert session is not None, "the request opened the session"
        trusted = bool(session._trust_env)
        await kube.close()
        return trusted

    assert not asyncio.run(session_trusts_env())


@pytest.mark.parametrize("concurrency", [1, 2])
def test_watches_never_take_the_requests_connections(tmp_path: Path, concurrency: int) -> None:
    """More watches open than PJ_API_CONCURRENCY: a request still gets a connection (in
    one pool, it waited for a watch to end, i.e. until its own timeout)."""
    watching = 3

    async def scenario() -> None:
        open_watches: list[web.StreamResponse] = []
        done = asyncio.Event()

        async def handle(request: web.Request) -> web.StreamResponse:
            if request.query.get("watch") != "true":
                return web.json_response({"kind": "Pod", "metadata": {"name": "p"}})
            response = web.StreamResponse()
            await response.prepare(request)
            open_watches.append(response)
            await done.wait()  # a watch that lasts
            return response

        async with serving(handle, tmp_path / "kubeconfig") as kubeconfig:
            kube = Kube(await load_configuration(str(kubeconfig)), concurrency=concurrency)

            async def consume() -> None:
                async for _ in kube.watch("/api/v1/pods", []):
                    pass

            watches = [asyncio.create_task(consume()) for _ in range(watching)]
            try:
                await wait_until_async(
                    lambda: len(open_watches) == watching, timeout=10, interval=0.01,
                    what="every watch open",
                )  # fmt: skip
                answer = await kube.request("GET", "/api/v1/namespaces/ns/pods/p", timeout=5)
                assert answer["metadata"]["name"] == "p"
            finally:
                done.set()
                for task in watches:
                    task.cancel()
                await asyncio.gather(*watches, return_exceptions=True)
                await kube.close()

    asyncio.run(scenario())
