"""The failover mode (``--failover``): the operator starts under leader election while
another holder renews the Lease, so it stands by (and lists and watches the pods: its
warm caches); once the stub has sent it every pod, the harness releases the Lease as a
stopping leader does and creates a probe job. Timed from the takeover (the standby's
write of the Lease naming itself): the probe's first pod, and every job's status written
once (the seeded jobs' statuses all need a write, so this is the upper bound of a real
failover's resync, whose jobs need none)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from tests.support.stub_api.lease import release, takeover
from tests.support.stub_api.record import Recorder
from tests.support.stub_api.store import Store

from .. import procstat

#: The probe's name: it sorts after every seeded job (created in the last namespace, as
#: listed by key), as a job created during a failover sorts after jobs listed long before:
#: kopf hands the listing on in that order, and it is queued last.
PROBE_NAME = "zz-failover-probe"


async def measure(
    store: Store,
    recorder: Recorder,
    pid: int,
    namespace: str,
    create_probe: Callable[[], str],
    timeout: float,
) -> dict[str, Any]:
    """The takeover, once the standby has been sent every pod (see the module): the
    Lease in ``namespace`` released, a probe job created (``create_probe``: its uid)."""
    standby = procstat.sample(pid)
    released_at = time.monotonic()
    release(store, namespace)
    probe = create_probe()
    recorder.timed.add(probe)
    took = await takeover(store, namespace, 30.0)
    if took is None:
        return {"error": "no takeover within 30 s of the release"}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not (
        probe in recorder.first_pod_post and recorder.all_synced.is_set()
    ):
        await asyncio.sleep(0.05)
    after = procstat.sample(pid)
    first = recorder.first_pod_post.get(probe)
    synced = recorder.synced_at
    return {
        "standby_rss_mib": round(standby.rss_bytes / procstat.MIB, 1) if standby else None,
        "standby_cpu_s": round(standby.cpu_seconds, 2) if standby else None,
        "takeover_after_release_s": round(took - released_at, 2),
        "first_pod_after_takeover_s": round(first - took, 2) if first else None,
        "synced_after_takeover_s": round(synced - took, 2) if synced else None,
        "jobs_synced": recorder.synced(),
        "leader_cpu_s": (
            round(after.cpu_seconds - standby.cpu_seconds, 2) if after and standby else None
        ),
        "peak_rss_mib": round(after.hwm_bytes / procstat.MIB, 1) if after else None,
    }
