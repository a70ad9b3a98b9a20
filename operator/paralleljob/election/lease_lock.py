"""The Lease a leader election is held on (``coordination.k8s.io/v1``): client-go's
``resourcelock.LeaseLock``. Every write is a PUT of the version last read or written (or
a POST of a new Lease): of two candidates racing for it, one write fails (409).
"""

from __future__ import annotations

from typing import Protocol

from ..core import LeaseRecord, record_of, spec_of
from ..json_types import JsonDict
from ..runtime.api import ApiError
from ..runtime.kube import Kube

LEASES_API = "/apis/coordination.k8s.io/v1"


def lease_path(namespace: str, name: str = "") -> str:
    path = f"{LEASES_API}/namespaces/{namespace}/leases"
    return f"{path}/{name}" if name else path


class LeaseLock(Protocol):
    """client-go's ``resourcelock.Interface`` for one Lease. Every call raises ApiError
    when the API server refuses it (409: another candidate wrote first) or is unreachable."""

    @property
    def describe(self) -> str:
        """``namespace/name``"""
        ...

    async def get(self) -> LeaseRecord | None:
        """The Lease's record, None if there is no Lease."""
        ...

    async def create(self, record: LeaseRecord) -> None: ...

    async def update(self, record: LeaseRecord) -> None:
        """Writes ``record`` over the version last read or written, not over a newer one."""
        ...


class KubeLeaseLock:
    """The Lease through the operator's client (its own instance: renewals never queue
    behind the operator's requests or its rate limit)."""

    def __init__(self, kube: Kube, namespace: str, name: str, timeout: float) -> None:
        self.namespace = namespace
        self.name = name
        self._kube = kube
        self._timeout = timeout
        self._lease: JsonDict | None = None

    @property
    def describe(self) -> str:
        return f"{self.namespace}/{self.name}"

    async def get(self) -> LeaseRecord | None:
        try:
            lease = await self._kube.request(
                "GET", lease_path(self.namespace, self.name), timeout=self._timeout
            )
        except ApiError as exc:
            if exc.not_found:
                self._lease = None
                return None
            raise
        self._lease = lease
        return record_of(lease)

    async def create(self, record: LeaseRecord) -> None:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": spec_of(record),
        }
        self._lease = await self._kube.request(
            "POST", lease_path(self.namespace), body=body, timeout=self._timeout
        )

    async def update(self, record: LeaseRecord) -> None:
        if self._lease is None:
            raise ApiError(409, "Conflict", "the lease was not read before this update")
        body = dict(self._lease)
        body["spec"] = {**(self._lease.get("spec") or {}), **spec_of(record)}
        self._lease = await self._kube.request(
            "PUT", lease_path(self.namespace, self.name), body=body, timeout=self._timeout
        )
