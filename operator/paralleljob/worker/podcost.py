"""``--deletion-cost``: the worker marks its own pod idle or busy for a graceful scale-down.

A ParallelJob's scale-down removes the pods with the lowest
``controller.kubernetes.io/pod-deletion-cost`` first (after the pending and not-ready ones,
as a ReplicaSet's does). So the worker sets its pod's annotation to :data:`IDLE_COST` while
it waits for an item and to :data:`BUSY_COST` while COMMAND runs: lowering parallelism then
stops idle workers, and no item is cut short and run again.

The pod is named by the downward API (``POD_NAME``, ``POD_NAMESPACE``) and patched through
the in-cluster API with the pod's service-account token (RBAC: get and patch pods). The cost
is a hint: a failed patch logs one line (one per run of failures) and the work goes on.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass

#: The annotation a ReplicaSet's (and a ParallelJob's) scale-down reads; the worker shares
#: no code with the operator, so it names it itself.
POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"

#: While waiting for an item: below a pod without the annotation (0), so that an idle
#: worker goes before one that is busy or has not said yet.
IDLE_COST = -100
#: While COMMAND runs: above a pod without the annotation.
BUSY_COST = 100

SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
#: Seconds a patch may take: the worker waits for it before it runs or takes an item.
TIMEOUT = 5.0

log = logging.getLogger("paralleljob-worker")


def patch_body(value: int) -> bytes:
    """The JSON merge patch that sets the pod's deletion cost to ``value``."""
    patch = {"metadata": {"annotations": {POD_DELETION_COST: str(value)}}}
    return json.dumps(patch, separators=(",", ":")).encode()


def pod_path(namespace: str, name: str) -> str:
    quote = urllib.parse.quote
    return f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}"


@dataclass(frozen=True)
class PodRef:
    """Where the worker's pod is and how to reach the API server."""

    namespace: str
    name: str
    server: str
    token_file: str = f"{SERVICE_ACCOUNT}/token"
    ca_file: str = f"{SERVICE_ACCOUNT}/ca.crt"


def pod_ref(env: Mapping[str, str]) -> PodRef | None:
    """The worker's pod from the downward API and the in-cluster API server from the
    service's environment; None when either is missing (not in a pod, or no env)."""
    name, host = env.get("POD_NAME", ""), env.get("KUBERNETES_SERVICE_HOST", "")
    namespace = env.get("POD_NAMESPACE", "") or _namespace_file()
    if not (name and namespace and host):
        return None
    port = env.get("KUBERNETES_SERVICE_PORT", "443")
    host = f"[{host}]" if ":" in host else host  # an IPv6 address
    return PodRef(namespace=namespace, name=name, server=f"https://{host}:{port}")


def _namespace_file() -> str:
    try:
        with open(f"{SERVICE_ACCOUNT}/namespace", encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return ""


Send = Callable[[int], None]


def http_send(ref: PodRef, timeout: float = TIMEOUT) -> Send:
    """Patches the pod's annotation over HTTP(S); the token is read on every call (the
    kubelet rotates it)."""
    context = None
    if ref.server.startswith("https:"):
        context = ssl.create_default_context(cafile=ref.ca_file)

    def send(value: int) -> None:
        headers = {"Content-Type": "application/merge-patch+json", "Accept": "application/json"}
        try:
            with open(ref.token_file, encoding="utf-8") as f:
                headers["Authorization"] = f"Bearer {f.read().strip()}"
        except OSError:
            pass  # no token: the API server will say what is missing
        request = urllib.request.Request(
            ref.server + pod_path(ref.namespace, ref.name),
            data=patch_body(value),
            headers=headers,
            method="PATCH",
        )
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            response.read()

    return send


class DeletionCost:
    """The pod's cost as the worker last set it; :meth:`set` patches only on a change."""

    def __init__(self, send: Send, where: str = "") -> None:
        self._send = send
        self._where = where
        self._current: int | None = None
        self._failing = False

    @property
    def current(self) -> int | None:
        """The cost last set successfully (None: not yet)."""
        return self._current

    def idle(self) -> None:
        """The worker waits for an item."""
        self.set(IDLE_COST)

    def busy(self) -> None:
        """The worker runs an item."""
        self.set(BUSY_COST)

    def set(self, value: int) -> None:
        if value == self._current:
            return
        try:
            self._send(value)
        # URLError, HTTPError, timeouts (OSError); a garbled reply (HTTPException).
        except (OSError, ValueError, http.client.HTTPException) as err:
            if not self._failing:
                log.info(
                    "cannot set %s%s to %d (going on without it): %s",
                    POD_DELETION_COST,
                    self._where,
                    value,
                    " ".join(_describe(err).split()),
                )
            self._failing = True
            self._current = None  # unknown: try again on the next change
            return
        if self._failing:
            log.info("%s%s set again", POD_DELETION_COST, self._where)
        self._failing = False
        self._current = value


def _describe(err: Exception) -> str:
    if isinstance(err, urllib.error.HTTPError):
        try:
            message = json.loads(err.read() or b"{}").get("message", "")
        except (ValueError, OSError, AttributeError):
            message = ""
        return f"HTTP {err.code}{': ' + message if message else ''}"
    if isinstance(err, urllib.error.URLError):
        return str(err.reason)
    return str(err)


def from_environment(env: Mapping[str, str] | None = None) -> DeletionCost | None:
    """The worker's DeletionCost in its pod; None (with one line) when it is not in one."""
    ref = pod_ref(os.environ if env is None else env)
    if ref is None:
        log.info(
            "--deletion-cost: no POD_NAME/POD_NAMESPACE or in-cluster API server; "
            "the pod's deletion cost is left alone"
        )
        return None
    try:
        send = http_send(ref)
    except (OSError, ValueError) as err:  # no CA file
        log.info("--deletion-cost: %s; the pod's deletion cost is left alone", err)
        return None
    return DeletionCost(send, f" of pod {ref.namespace}/{ref.name}")
