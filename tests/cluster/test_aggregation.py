"""The local cluster's API aggregation layer (hack/cluster-up.sh: front-proxy CA and
client certificate, --requestheader-* and --proxy-client-* flags), which aggregated
APIs such as KEDA's external metrics need.

The test serves a tiny aggregated API itself: an HTTPS server in a thread on the
cluster's bridge address, published as a Service without selector plus an
EndpointSlice, and registered as an APIService. It checks that the APIService becomes
Available and that a request through the aggregator arrives with the front-proxy client
certificate and the caller's identity in the X-Remote-* headers. Local cluster only: a
kind API server cannot reach a server on this host's bridge.
"""

from __future__ import annotations

import base64
import json
import re
import ssl
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import ApiException

from tests.conftest import REPO_ROOT, kubectl
from tests.support.wait import wait_until

# Exclusive: every client's discovery lists the APIService's group while it is
# registered, and reports it, on stderr, whenever it is not Available (as it comes up or
# goes away), which other tests' kubectl calls would then print.
pytestmark = [pytest.mark.exclusive]

GROUP = "smoke.paralleljob.dev"
VERSION = "v1alpha1"
APISERVICE = f"{VERSION}.{GROUP}"
SERVICE = "smoke-api"
SERVICE_PORT = 443
TIMEOUT = 30


def _bridge_ip() -> str:
    """The cluster bridge's gateway address, as hack/cluster-env.sh defines it."""
    text = (REPO_ROOT / "hack" / "cluster-env.sh").read_text()
    match = re.search(r"^BRIDGE_IP=(\S+)$", text, re.M)
    assert match, "BRIDGE_IP not found in hack/cluster-env.sh"
    return match.group(1)


# ---------------------------------------------------------------- the aggregated API server

GROUP_VERSION = {"groupVersion": f"{GROUP}/{VERSION}", "version": VERSION}
API_GROUP = {
    "kind": "APIGroup",
    "apiVersion": "v1",
    "name": GROUP,
    "versions": [GROUP_VERSION],
    "preferredVersion": GROUP_VERSION,
}
# Only "get": the garbage collector and the namespace controller, which act on every
# discovered resource that can be listed or deleted, leave it alone.
RESOURCE_LIST = {
    "kind": "APIResourceList",
    "apiVersion": "v1",
    "groupVersion": f"{GROUP}/{VERSION}",
    "resources": [
        {
            "name": "pings",
            "singularName": "ping",
            "namespaced": False,
            "kind": "Ping",
            "verbs": ["get"],
        }
    ],
}
DISCOVERY: dict[str, dict[str, Any]] = {
    "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": [API_GROUP]},
    f"/apis/{GROUP}": API_GROUP,
    f"/apis/{GROUP}/{VERSION}": RESOURCE_LIST,
}


@dataclass(frozen=True)
class Seen:
    """One request the server answered."""

    path: str
    peer: str
    client_cn: str
    user: str | None
    groups: list[str]


@dataclass
class Record:
    lock: threading.Lock = field(default_factory=threading.Lock)
    requests: list[Seen] = field(default_factory=list)
    tls_errors: list[str] = field(default_factory=list)

    def snapshot(self) -> tuple[list[Seen], list[str]]:
        with self.lock:
            return list(self.requests), list(self.tls_errors)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        peer = self.connection.getpeercert() or {}
        cn = next((v for rdn in peer.get("subject", ()) for k, v in rdn if k == "commonName"), "")
        with self.server.record.lock:
            self.server.record.requests.append(
                Seen(
                    path,
                    self.client_address[0],
                    cn,
                    self.headers.get("X-Remote-User"),
                    self.headers.get_all("X-Remote-Group") or [],
                )
            )
        body = DISCOVERY.get(path)
        status = 200
        if body is None:
            status = 404
            body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    """HTTPS; the TLS handshake happens in the connection's own thread, and a failed
    one (e.g. no client certificate) is recorded for the failure message."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], context: ssl.SSLContext) -> None:
        super().__init__(address, _Handler)
        self.context = context
        self.record = Record()

    def finish_request(self, request: Any, client_address: Any) -> None:
        request.settimeout(10)
        try:
            tls = self.context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as error:
            with self.record.lock:
                self.record.tls_errors.append(repr(error))
            return
        try:
            super().finish_request(tls, client_address)
        finally:
            tls.close()


def _self_signed(directory: Path, dns_name: str) -> tuple[Path, Path]:
    cert, key = directory / "serving.crt", directory / "serving.key"
    command = ["openssl", "req", "-x509", "-nodes", "-days", "1"]
    command += ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]
    command += ["-subj", f"/CN={dns_name}", "-addext", f"subjectAltName=DNS:{dns_name}"]
    command += ["-keyout", str(key), "-out", str(cert)]
    subprocess.run(command, check=True, capture_output=True)
    return cert, key


@dataclass(frozen=True)
class AggregatedAPI:
    server: _Server
    # What the API server publishes for aggregated API servers
    # (kube-system/extension-apiserver-authentication).
    allowed_names: list[str]


def _request_header_config() -> dict[str, str]:
    out = kubectl(
        "get", "configmap", "extension-apiserver-authentication", "-n", "kube-system", "-o", "json"
    ).stdout
    data: dict[str, str] = json.loads(out)["data"]
    return data


def _delete_apiservice(registration: Any) -> None:
    try:
        registration.delete_api_service(APISERVICE)
    except ApiException as error:
        if error.status != 404:
            raise


def _available(api: Any) -> Any:
    conditions = api.read_api_service(APISERVICE).status.conditions or []
    return next((c for c in conditions if c.type == "Available"), None)


@pytest.fixture
def aggregated_api(api_client: Any, namespace: str, tmp_path: Path) -> Iterator[AggregatedAPI]:
    from kubernetes import client

    # As a real aggregated API server does: trust the X-Remote-* headers only from a
    # client certificate signed by the request-header CA the API server publishes.
    config = _request_header_config()
    assert "requestheader-client-ca-file" in config, f"no request-header CA published: {config}"
    allowed_names = json.loads(config["requestheader-allowed-names"])
    cert, key = _self_signed(tmp_path, f"{SERVICE}.{namespace}.svc")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(cadata=config["requestheader-client-ca-file"])

    server = _Server((_bridge_ip(), 0), context)
    thread = threading.Thread(target=server.serve_forever, name="aggregated-api", daemon=True)
    thread.start()
    registration: Any = client.ApiregistrationV1Api(api_client)
    # One left by an interrupted run would point at a deleted namespace.
    _delete_apiservice(registration)
    try:
        core_v1: Any = client.CoreV1Api(api_client)
        discovery_v1: Any = client.DiscoveryV1Api(api_client)
        address, port = server.server_address[:2]
        core_v1.create_namespaced_service(
            namespace,
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": SERVICE},
                "spec": {"ports": [{"name": "https", "port": SERVICE_PORT, "targetPort": port}]},
            },
        )
        discovery_v1.create_namespaced_endpoint_slice(
            namespace,
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": f"{SERVICE}-1",
                    "labels": {
                        "kubernetes.io/service-name": SERVICE,
                        "endpointslice.kubernetes.io/managed-by": "paralleljob-tests",
                    },
                },
                "addressType": "IPv4",
                "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
                "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
            },
        )
        registration.create_api_service(
            {
                "apiVersion": "apiregistration.k8s.io/v1",
                "kind": "APIService",
                "metadata": {"name": APISERVICE, "labels": {"paralleljob.dev/test": "true"}},
                "spec": {
                    "group": GROUP,
                    "version": VERSION,
                    "groupPriorityMinimum": 1000,
                    "versionPriority": 15,
                    "service": {"namespace": namespace, "name": SERVICE, "port": SERVICE_PORT},
                    "caBundle": base64.b64encode(cert.read_bytes()).decode(),
                },
            }
        )
        yield AggregatedAPI(server, allowed_names)
    finally:
        # The APIService first: while it is registered but unavailable, discovery of
        # the whole cluster is incomplete (namespace deletion, for one, stalls on it).
        _delete_apiservice(registration)
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
        # The Service and EndpointSlice go with the namespace (fixture `namespace`).


@pytest.mark.localcluster
def test_aggregated_api_becomes_available_and_is_proxied_with_the_front_proxy_cert(
    api_client: Any, aggregated_api: AggregatedAPI
) -> None:
    from kubernetes import client

    registration: Any = client.ApiregistrationV1Api(api_client)
    record = aggregated_api.server.record

    def available() -> Any:
        condition = _available(registration)
        return condition if condition is not None and condition.status == "True" else None

    try:
        condition = wait_until(
            available, timeout=TIMEOUT, what=f"APIService {APISERVICE} Available"
        )
    except AssertionError as error:
        seen, tls_errors = record.snapshot()
        raise AssertionError(
            f"{error}\ncondition: {_available(registration)}\n"
            f"requests: {seen}\nfailed TLS handshakes: {len(tls_errors)}, last: {tls_errors[-3:]}"
        ) from error
    assert condition.reason == "Passed", condition

    raw = kubectl("get", "--raw", f"/apis/{GROUP}/{VERSION}", check=False)
    assert raw.returncode == 0, raw.stderr
    assert json.loads(raw.stdout) == RESOURCE_LIST

    seen, _ = record.snapshot()
    proxied = [
        s for s in seen if s.path == f"/apis/{GROUP}/{VERSION}" and s.user == "kubernetes-admin"
    ]
    assert proxied, (
        f"kubectl's request did not reach the aggregated API server as kubernetes-admin: {seen}"
    )
    # The caller's identity (the admin kubeconfig's client certificate) in the
    # request headers, over a connection authenticated with the front-proxy client
    # certificate: the only one an aggregated API server takes those headers from.
    request = proxied[-1]
    assert "system:masters" in request.groups, request
    assert request.client_cn == "front-proxy-client", request
    assert request.client_cn in aggregated_api.allowed_names, (
        request,
        aggregated_api.allowed_names,
    )
