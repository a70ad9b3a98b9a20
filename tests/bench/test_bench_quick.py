"""`python -m bench --quick` (what `BENCH_QUICK=1 make bench` runs) works end to end on
the local cluster: every scenario of every setting produces figures, and the results
(markdown, JSON, plots) are written. It asserts that the bench works, never a speed.

The bench deploys the operator in-cluster (watching every namespace); afterwards it is
undeployed again, as tests/deploy does, so that no other test meets a second operator.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.scenarios import QUICK
from tests.conftest import REPO_ROOT, kubectl

CRD = "paralleljobs.paralleljob.dev"
DOCKERD = str(REPO_ROOT / "hack" / "dockerd.sh")
# One round per arm: the built-in and ParallelJobs everywhere, the operator's batch/v1 Jobs
# (managedBy naming it) in scenarios 1-4 and 7, the ceiling in scenario 1, the built-in
# alone under its own background load; scenario 8's quick level and its restart, for the
# built-in and ParallelJobs; at the API budget, scenario 1 only.
[QUICK_LEVEL] = QUICK.curve_levels
EXPECTED_AT_DEFAULTS = {
    *(
        (s, arm)
        for s in ("s1", "s2", "s3", "s4", "s5a-s1", "s5a-s3", "s6", "s7")
        for arm in ("Job", "ParallelJob")
    ),
    *((s, "Job-operator") for s in ("s1", "s2", "s3", "s4", "s7")),
    ("s1", "ceiling"),
    ("s5b-s1", "Job"),
    ("s5b-s3", "Job"),
    *((s, arm) for s in (f"s8-{QUICK_LEVEL}", "s8-restart") for arm in ("Job", "ParallelJob")),
}
EXPECTED = {
    "defaults": EXPECTED_AT_DEFAULTS,
    "equal": {("s1", "Job"), ("s1", "ParallelJob"), ("s1", "Job-operator"), ("s1", "ceiling")},
}


@pytest.fixture(scope="module")
def quick_run(
    kubeconfig: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, str]]:
    """Runs the quick bench once (on the session's cluster, started if need be); the
    results directory and the bench's stderr."""
    out = tmp_path_factory.mktemp("bench")
    crd_preinstalled = kubectl("get", "crd", CRD, check=False).returncode == 0
    engine_was_running = subprocess.run([DOCKERD, "status"], capture_output=True).returncode == 0
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "bench", "--quick", "--out", str(out)],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=1200,
        )
        assert proc.returncode == 0, f"python -m bench --quick failed:\n{proc.stderr[-6000:]}"
        yield out, proc.stderr
    finally:
        env = dict(os.environ)
        if crd_preinstalled:
            env["PJ_UNDEPLOY_KEEP_CRD"] = "1"
        subprocess.run(
            [str(REPO_ROOT / "hack" / "undeploy.sh")],
            env=env,
            capture_output=True,
            timeout=600,
            check=False,
        )
        if not engine_was_running:
            subprocess.run([DOCKERD, "stop"], capture_output=True, timeout=120, check=False)


def _results(out: Path) -> dict[str, Any]:
    [found] = out.glob("*-quick.json")
    data: dict[str, Any] = json.loads(found.read_text())
    return data


@pytest.mark.localcluster
@pytest.mark.kwok
def test_every_scenario_of_every_setting_produces_figures(quick_run: tuple[Path, str]) -> None:
    data = _results(quick_run[0])
    assert set(data["rounds"]) == set(EXPECTED)
    for setting, rounds in data["rounds"].items():
        assert {(r["scenario"], r["arm"]) for r in rounds} == EXPECTED[setting], setting
        failed = [r for r in rounds if r["error"] or not r["metrics"]]
        assert not failed, f"{setting}: rounds without figures: {failed}"


@pytest.mark.localcluster
@pytest.mark.kwok
def test_api_calls_per_pod_come_from_the_audit_log(quick_run: tuple[Path, str]) -> None:
    for setting, rounds in _results(quick_run[0])["rounds"].items():
        for r in (r for r in rounds if r["scenario"] == "s1"):
            assert r["calls_per_pod"] and r["calls_per_pod"] > 0, (setting, r["arm"])
            # Every arm creates each of its pods exactly once.
            assert r["calls"]["create pods"] == r["finished_pods"], (setting, r["arm"], r["calls"])


@pytest.mark.localcluster
@pytest.mark.kwok
def test_results_are_written_as_markdown_json_and_plots(quick_run: tuple[Path, str]) -> None:
    out, stderr = quick_run
    [markdown] = out.glob("*-quick.md")
    text = markdown.read_text()
    for heading in ("## Setting: equal API budget", "## Setting: defaults", "## Targets"):
        assert heading in text
    for plot in ("s1-pods", "s3-latency"):
        [png] = out.glob(f"*-quick-{plot}.png")
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png
        assert png.name in text, f"{png.name} is not linked from {markdown.name}"
    meta = _results(out)["meta"]
    assert meta["versions"]["KUBERNETES_VERSION"] and meta["machine"]["cpus"]
    assert meta["settings"]["equal"]["operator"]["config"]["PJ_API_QPS"] == "20"
    assert "[bench" in stderr, "no progress lines on stderr"
