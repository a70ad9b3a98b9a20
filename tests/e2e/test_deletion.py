"""Deleting a ParallelJob never needs the operator, as deleting a Job never needs the
job controller; the operator releases the pods' tracking finalizers when it is back."""

from __future__ import annotations

import pytest

from tests.support.wait import wait_until

from .conftest import Operator
from .support import Kubectl, held, kwok_template

pytestmark = [pytest.mark.kwok]


def test_a_job_is_deleted_while_the_operator_is_down_and_its_pods_released_on_return(
    operator: Operator, k: Kubectl
) -> None:
    k.create_pj("orphaned", kwok_template("1h"), completions=3, parallelism=3)
    wait_until(lambda: len(held(k.pods("orphaned"))) == 3, timeout=60, what="3 pods held")
    assert not k.pj("orphaned")["metadata"].get("finalizers"), "no finalizer on the job"
    operator.kill()
    # Returns at once: nothing waits for the operator (kubectl waits for the deletion).
    k.run("delete", "pj", "orphaned", "--timeout=20s")
    # Garbage collection marks the pods deleted; their tracking finalizers hold them.
    wait_until(
        lambda: all(p["metadata"].get("deletionTimestamp") for p in k.pods("orphaned")),
        timeout=60,
        what="the orphaned pods marked for deletion by the garbage collector",
    )
    operator.start()
    wait_until(lambda: k.pods("orphaned") == [], timeout=30, what="the pods released and gone")
