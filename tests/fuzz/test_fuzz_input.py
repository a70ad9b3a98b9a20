"""Generated ParallelJob bodies and merge patches against the real API server and one
operator: each is refused with a message naming the offending field, or accepted and
settles (Complete, Failed, deleted by its TTL, Suspended, idle at parallelism 0, or
PodCreationFailed when only pod validation refuses it). The operator logs no
traceback, and a job created before the run and one created after it complete."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest
from hypothesis import Phase, event, example, given, note, seed, settings

from tests.e2e.conftest import Operator
from tests.e2e.support import Kubectl, kwok_template
from tests.support.wait import wait_until

from .conftest import FUZZ_SEED, derandomized, fuzz_examples
from .inputs import (
    DELETE,
    INT32_MAX,
    INT64_MAX,
    Defect,
    Example,
    Json,
    Path,
    examples,
    job_body,
    with_defects,
)
from .support import (
    Answer,
    JobApi,
    OperatorLog,
    assert_no_traceback,
    check_refusal,
    held_pods,
    settle,
)

pytestmark = [pytest.mark.fuzz, pytest.mark.cluster, pytest.mark.kwok]


def _refused(name: str, path: Path, value: Json, naming: str) -> Example:
    """A valid job but for one defect that the API must refuse, naming ``naming``."""
    defect = Defect(path, value, rejected=(naming,))
    body = job_body(name, {"completions": 1, "template": kwok_template("0s")})
    return Example(with_defects(body, [defect]), (defect,))


#: The issue's own cases, run first in every run whatever the seed.
EXPLICIT = [
    _refused("int32-overflow", ("spec", "parallelism"), 2**31, "spec.parallelism"),
    _refused("huge", ("spec", "parallelism"), 2**40, "spec.parallelism"),
    _refused("beyond-int64", ("spec", "completions"), 2**64, "spec.completions"),
    _refused(
        "int64-overflow", ("spec", "activeDeadlineSeconds"), 2**63, "spec.activeDeadlineSeconds"
    ),
    _refused("negative", ("spec", "backoffLimit"), -(2**40), "spec.backoffLimit"),
    _refused("string", ("spec", "completions"), "3", "spec.completions"),
    _refused("float", ("spec", "parallelism"), 1.5, "spec.parallelism"),
    _refused("list", ("spec", "ttlSecondsAfterFinished"), [1], "spec.ttlSecondsAfterFinished"),
    _refused("no-template", ("spec", "template"), DELETE, "spec.template"),
    _refused(
        "always",
        ("spec", "template", "spec", "restartPolicy"),
        "Always",
        "spec.template.spec.restartPolicy",
    ),
    _refused("giant", ("metadata", "name"), "a" * 254, "metadata.name"),
    _refused("not-dns", ("metadata", "name"), "Not_A_DNS_Name", "metadata.name"),
    _refused("unknown", ("spec", "parallelizm"), 2, 'unknown field "spec.parallelizm"'),
    Example(
        job_body(
            "boundaries",
            {
                "completions": INT32_MAX,
                "parallelism": 0,
                "backoffLimit": INT32_MAX,
                "activeDeadlineSeconds": INT64_MAX,
                "ttlSecondsAfterFinished": None,
                "template": kwok_template("0s"),
            },
        )
    ),
    Example(
        job_body(
            "failed-indexes",
            {
                "completionMode": "Indexed",
                "completions": 3,
                "parallelism": 3,
                "backoffLimitPerIndex": 0,
                "maxFailedIndexes": 1,
                "podFailurePolicy": {
                    "rules": [
                        {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [1]}}
                    ]
                },
                "successPolicy": {"rules": [{"succeededIndexes": "0"}]},
                "template": kwok_template("0s", exit_code=1),  # restartPolicy Never
            },
        )
    ),
]


def _with_explicit_examples(test: Callable[[Example], None]) -> Callable[[Example], None]:
    for case in reversed(EXPLICIT):
        test = example(case)(test)
    return test


class Fuzz:
    """Sends one example and checks what came of it; counts the outcomes."""

    def __init__(self, jobs: JobApi, log: OperatorLog) -> None:
        self.jobs = jobs
        self.log = log
        self.outcomes: Counter[str] = Counter()

    def run(self, ex: Example) -> None:
        note(f"FUZZ_SEED={FUZZ_SEED}" if not derandomized() else "derandomized")
        for defect in ex.defects:
            event(defect.label)
        try:
            result = self._patch(ex) if ex.patch is not None else self._create(ex)
        finally:
            if _may_exist(ex):
                self.jobs.delete_and_wait(ex.name)
        self.outcomes[result] += 1
        event(f"outcome: {result}")
        self.log.check()

    def _create(self, ex: Example) -> str:
        """Dry run first: an input the API should have refused is never run for real (a
        huge parallelism would flood the cluster)."""
        answer = self.jobs.create(ex.body, dry_run=True)
        if ex.rejected:
            check_refusal(answer, ex.rejected, f"a job with {_described(ex.defects)}")
            return "refused"
        assert answer.accepted, f"a valid job was refused ({answer.code}): {answer.message}"
        created = self.jobs.create(ex.body)
        assert created.accepted, f"refused after a dry run passed: {created.message}"
        return settle(self.jobs, ex.name, created.obj["spec"], ex.pod_refused, self.log)

    def _patch(self, ex: Example) -> str:
        """The base job (valid) first, then the patch while it runs; refused or not, the
        job settles."""
        base = self.jobs.create(ex.body)
        assert base.accepted, f"the patch's base job was refused: {base.message}"
        answer = self.jobs.patch(ex.name, ex.patch, dry_run=True)
        if _gone_by_ttl(answer, base.obj["spec"]):
            return "deleted after ttlSecondsAfterFinished before the patch"
        if ex.rejected:
            check_refusal(answer, ex.rejected, f"a patch with {_described(ex.defects)}")
            settle(self.jobs, ex.name, base.obj["spec"], log=self.log)
            return "patch refused"
        assert answer.accepted, f"a valid patch was refused ({answer.code}): {answer.message}"
        patched = self.jobs.patch(ex.name, ex.patch)
        if _gone_by_ttl(patched, base.obj["spec"]):
            return "deleted after ttlSecondsAfterFinished before the patch"
        assert patched.accepted, f"refused after a dry run passed: {patched.message}"
        return f"patched, {settle(self.jobs, ex.name, patched.obj['spec'], log=self.log)}"


def _gone_by_ttl(answer: Answer, spec: dict[str, object]) -> bool:
    """The base finished and its ttlSecondsAfterFinished deleted it before the patch came."""
    return answer.code == 404 and "ttlSecondsAfterFinished" in spec


def _may_exist(ex: Example) -> bool:
    """Whether the example may have left a job behind (a refused create leaves none)."""
    return ex.patch is not None or not ex.rejected


def _described(defects: tuple[Defect, ...]) -> str:
    return ", ".join(f"{'.'.join(map(str, d.path))}={d.value!r:.80}" for d in defects)


def _finished(k: Kubectl, name: str) -> str:
    return wait_until(lambda: k.finished(name), timeout=60, what=f"{name} done")


def test_generated_specs_and_patches_are_refused_clearly_or_settle(
    operator: Operator, k: Kubectl, jobs: JobApi
) -> None:
    k.create_pj("healthy-before", kwok_template("2s"), completions=6, parallelism=2)
    fuzz = Fuzz(jobs, OperatorLog(operator))

    @settings(
        max_examples=fuzz_examples(),
        deadline=None,
        derandomize=derandomized(),
        # Explaining a failure re-runs it many times against the cluster: the falsifying
        # example and the operator's log say enough.
        phases=[p for p in Phase if p != Phase.explain],
        print_blob=True,
    )
    @given(examples())
    @_with_explicit_examples
    def check(ex: Example) -> None:
        fuzz.run(ex)

    if not derandomized():
        check = seed(FUZZ_SEED)(check)
    check()

    run = "derandomized" if derandomized() else f"seed {FUZZ_SEED}"
    print(f"fuzz ({run}): {sum(fuzz.outcomes.values())} examples: {dict(fuzz.outcomes)}")
    k.create_pj("healthy-after", kwok_template("0s"), completions=3, parallelism=3)
    for name in ("healthy-before", "healthy-after"):
        assert _finished(k, name) == "Complete", k.status(name)
    wait_until(lambda: held_pods(k) == [], timeout=60, what="no pod left with the finalizer")
    assert_no_traceback(operator)
