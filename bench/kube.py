"""The bench's one HTTP client: a minimal asyncio Kubernetes client, one aiohttp session,
JSON dicts in and out.

The bench drives and observes the cluster with it (as the admin user, whom the audit
policy does not record), and the ceiling client makes its calls with it (as its own
service account, which it does record); it also reads kube-controller-manager's
/metrics, and the scale harness its operator's /metrics and /healthz (plain http).
Nothing here rate-limits: what is measured is the controllers' pace, not the bench's.
"""

from __future__ import annotations

import base64
import contextlib
import json
import ssl
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml

JsonDict = dict[str, Any]
MERGE_PATCH = "application/merge-patch+json"


class ApiError(Exception):
    def __init__(self, status: int, method: str, path: str, body: str) -> None:
        super().__init__(f"{method} {path}: {status} {body[:300]}")
        self.status = status


@contextlib.contextmanager
def tolerating(status: int) -> Iterator[None]:
    """Suppresses an ApiError of ``status`` (404: gone already; 409: there already)."""
    try:
        yield
    except ApiError as exc:
        if exc.status != status:
            raise


@dataclass(frozen=True)
class Credentials:
    """Where the server is and how to authenticate to it: a client certificate (PEM, as
    the local cluster's kubeconfigs embed one), a bearer token, or nothing (plain http)."""

    server: str
    ca_pem: str = ""
    client_cert_pem: bytes = b""
    client_key_pem: bytes = b""
    token: str = ""
    #: False: any serving certificate is accepted (a self-signed one).
    verify: bool = True

    def with_token(self, token: str) -> Credentials:
        """The same server, authenticating with a bearer token instead."""
        return Credentials(self.server, self.ca_pem, token=token)

    def ssl_context(self) -> ssl.SSLContext | None:
        """None for a plain http server."""
        if not self.server.startswith("https:"):
            return None
        context = ssl.create_default_context(cadata=self.ca_pem or None)
        if not self.verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if self.client_cert_pem:
            # ssl loads a client certificate only from files: a private directory,
            # removed as soon as it is loaded.
            with tempfile.TemporaryDirectory() as tmp:
                cert, key = Path(tmp, "cert.pem"), Path(tmp, "key.pem")
                cert.write_bytes(self.client_cert_pem)
                key.touch(mode=0o600)
                key.write_bytes(self.client_key_pem)
                context.load_cert_chain(cert, key)
        return context


def load_credentials(path: Path) -> Credentials:
    """The current context of a kubeconfig whose certificates are embedded (``-data``)."""
    config = yaml.safe_load(path.read_text())
    contexts = {c["name"]: c["context"] for c in config["contexts"]}
    context = contexts[config["current-context"]]
    cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
    user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
    ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
    if "token" in user:
        return Credentials(cluster["server"], ca, token=user["token"])
    return Credentials(
        cluster["server"],
        ca,
        client_cert_pem=base64.b64decode(user["client-certificate-data"]),
        client_key_pem=base64.b64decode(user["client-key-data"]),
    )


@dataclass(frozen=True)
class WatchEvent:
    """A watch event and the monotonic time the client received it."""

    received: float
    type: str
    object: JsonDict


class Kube:
    """``async with Kube(credentials) as kube:`` one session for every request."""

    def __init__(self, credentials: Credentials, *, connections: int = 100) -> None:
        self.credentials = credentials
        self.connections = connections
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Kube:
        headers = {"Accept": "application/json"}
        if self.credentials.token:
            headers["Authorization"] = f"Bearer {self.credentials.token}"
        context = self.credentials.ssl_context()
        connector = aiohttp.TCPConnector(limit=self.connections, ssl=context or True)
        self._session = aiohttp.ClientSession(
            base_url=self.credentials.server,
            headers=headers,
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        assert self._session is not None, "use Kube as an async context manager"
        return self._session

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
        timeout: float = 60,
    ) -> JsonDict:
        data = None if body is None else json.dumps(body)
        headers = {"Content-Type": content_type} if data is not None else {}
        text = await self._send(method, path, timeout, data=data, params=params, headers=headers)
        result: JsonDict = json.loads(text) if text else {}
        return result

    async def get_text(self, path: str, *, timeout: float = 30) -> str:
        """A non-JSON GET (/metrics, /healthz); an ApiError for an error status."""
        return await self._send("GET", path, timeout)

    async def _send(self, method: str, path: str, timeout: float, **options: Any) -> str:
        """The answer's body; an ApiError for an error status."""
        total = aiohttp.ClientTimeout(total=timeout)
        async with self.session.request(method, path, timeout=total, **options) as resp:
            text = await resp.text()
            if resp.status >= 400:
                raise ApiError(resp.status, method, path, text)
            return text

    async def get(self, path: str, **params: str) -> JsonDict:
        return await self.request("GET", path, params=params)

    async def create(self, path: str, body: JsonDict) -> JsonDict:
        return await self.request("POST", path, body)

    async def patch(self, path: str, body: JsonDict) -> JsonDict:
        return await self.request("PATCH", path, body, content_type=MERGE_PATCH)

    async def delete(self, path: str, **params: str) -> JsonDict:
        return await self.request("DELETE", path, params=params)

    async def watch(self, path: str, resource_version: str) -> AsyncIterator[WatchEvent]:
        """One watch request from ``resource_version`` until the server ends it.

        Lines are split here rather than by aiohttp's readline, which caps line length.
        """
        params = {
            "watch": "1",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": "600",
        }
        async with self.session.get(
            path, params=params, timeout=aiohttp.ClientTimeout(total=None, sock_read=None)
        ) as resp:
            if resp.status >= 400:
                raise ApiError(resp.status, "WATCH", path, await resp.text())
            buffer = b""
            async for chunk in resp.content.iter_any():
                received = time.monotonic()
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.strip():
                        event = json.loads(line)
                        yield WatchEvent(received, event["type"], event["object"])
