"""The Fence (crds/paralleljob.dev_fences.yaml): the leader's name where the API server
judges the operator's writes as they land (manifests/fence-policy.yaml, issue 44).

The write fence (fence.py) bounds when a write is *sent*; one already on its way (a slow
link, the API server's queue) can still land after a standby took the Lease, and there
undo what the new leader's catch-up read. So the new leader names itself in the Fence
after it takes the Lease and before it acts, and the API server's
ValidatingAdmissionPolicy refuses, from then on, the writes of every other pod of the
operator's service account: what the old leader sent late is refused where it lands.

The old leader cannot name itself again with a late write of its own: every write of
the Fence is a PUT of the version read (or a POST, refused once the Fence exists), sent
only while the writer's own fence is open. A late PUT carries a version older than the
new leader's and is refused (409); a read that could show the new leader's version is
answered after the new leader took the Lease, which is at least the lease duration
after the old leader's last renewal started, when the old leader's fence (the shorter
renew deadline) has shut: it sends nothing more.

Without leader election the operator deletes the Fence: where there is none the policy
admits every write (``parameterNotFoundAction: Allow``).
"""

from __future__ import annotations

from .. import constants as c
from ..json_types import JsonDict
from ..runtime.api import ApiError
from ..runtime.kube import Kube
from .fence import WriteFence

FENCES_API = f"/apis/{c.GROUP}/{c.VERSION}"
#: Seconds any one request about the Fence may take.
TIMEOUT = 10.0


def fence_path(namespace: str, name: str = "") -> str:
    path = f"{FENCES_API}/namespaces/{namespace}/fences"
    return f"{path}/{name}" if name else path


class FenceObject:
    """The Fence ``namespace/name`` (the leader-election Lease's), through the elector's
    own client: ``claim`` as the new leader, ``delete`` when running alone."""

    def __init__(self, kube: Kube, namespace: str, name: str) -> None:
        self.namespace = namespace
        self.name = name
        self._kube = kube

    @property
    def describe(self) -> str:
        return f"{self.namespace}/{self.name}"

    async def claim(self, holder: str, transitions: int, fence: WriteFence) -> bool:
        """Names ``holder`` in the Fence, over whatever it said; False when this cluster
        serves no Fence kind (no policy can judge by one). Each write goes out only while
        ``fence`` is open, within what is left of it; a lost race (409) reads again."""
        while True:
            current = await self._get()
            spec = {"holderIdentity": holder, "leaseTransitions": transitions}
            try:
                if current is None:
                    await self._write("POST", fence_path(self.namespace), self._new(spec), fence)
                else:
                    body = {**current, "spec": spec}
                    await self._write("PUT", fence_path(self.namespace, self.name), body, fence)
            except ApiError as exc:
                if exc.conflict:
                    continue
                if exc.not_found and current is None:
                    return False
                raise
            return True

    async def delete(self) -> None:
        """No Fence: the policy admits every write of the operator's pods."""
        try:
            await self._kube.request(
                "DELETE", fence_path(self.namespace, self.name), timeout=TIMEOUT
            )
        except ApiError as exc:
            if not exc.not_found:
                raise

    async def _get(self) -> JsonDict | None:
        try:
            return await self._kube.request(
                "GET", fence_path(self.namespace, self.name), timeout=TIMEOUT
            )
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    async def _write(self, method: str, path: str, body: JsonDict, fence: WriteFence) -> None:
        left = fence.check(method, path)  # raises NotLeading once the Lease may be another's
        await self._kube.request(method, path, body=body, timeout=min(left, TIMEOUT))

    def _new(self, spec: JsonDict) -> JsonDict:
        return {
            "apiVersion": f"{c.GROUP}/{c.VERSION}",
            "kind": "Fence",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": spec,
        }
