"""``python -m bench.combine``: partial runs' files merged into one report."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench import combine, output
from bench.runner import Round
from bench.scenarios import QUICK
from bench.workloads import Arm


def _meta(commit: str, minutes: float) -> dict[str, Any]:
    return {
        "date": "2026-12-02",
        "quick": False,
        "note": "",
        "commit": commit,
        "rounds": 1,
        "versions": {"KUBERNETES_VERSION": "v1.34.4"},
        "machine": {"cpus": 2},
        "settings": {
            "defaults": {
                "description": "defaults",
                "operator": {"image": "paralleljob-operator:x", "config": {}},
            }
        },
        "duration_min": minutes,
    }


def _part(
    tmp_path: Path, name: str, arm: Arm, levels: tuple[int, ...], rss: float, commit: str
) -> Path:
    sizes = replace(QUICK, curve_levels=levels)
    rounds = [
        Round(f"s8-{n}", arm, 1, metrics={"live_objects": 6.0 * n, "controller_rss_mb": rss})
        for n in levels
    ]
    meta = {**_meta(commit, 30), "sizes": vars(sizes)}
    output.write(tmp_path, name, meta, {"defaults": rounds}, sizes, show=False)
    return tmp_path / f"{name}.json"


def test_parts_merge_into_one_report_with_both_arms(tmp_path: Path) -> None:
    operator = _part(tmp_path, "op", Arm.OPERATOR, (1000, 10000), 200.0, "aaa")
    builtin = _part(tmp_path, "kcm", Arm.BUILTIN, (5000, 10000), 400.0, "bbb")

    argv = [str(operator), str(builtin), "--stem", "both", "--out", str(tmp_path), "--note", "n"]
    assert combine.main(argv) == 0

    data = json.loads((tmp_path / "both.json").read_text())
    arms = sorted((r["scenario"], r["arm"]) for r in data["rounds"]["defaults"])
    assert arms == [
        ("s8-1000", "ParallelJob"),
        ("s8-10000", "Job"),
        ("s8-10000", "ParallelJob"),
        ("s8-5000", "Job"),
    ]
    assert data["meta"]["sizes"]["curve_levels"] == [1000, 5000, 10000]
    assert data["meta"]["commit"] == "aaa, bbb"
    assert data["meta"]["duration_min"] == 60
    text = (tmp_path / "both.md").read_text()
    assert "combined from op.json, kcm.json; n" in text
    target = "| S8 operator RSS ≤ kube-controller-manager's, at 10,000 jobs | defaults |"
    assert f"{target} 200 vs 400 MiB | met |" in text
    assert (tmp_path / "both-s8-rss.png").exists()
    assert not (tmp_path / "both-s1-pods.png").exists()  # no scenario 1 in either part


def test_a_round_survives_its_json() -> None:
    r = Round("s8-100", Arm.OPERATOR_JOB, 2, metrics={"x": 1.5}, calls={"create pods": 3})
    r.usage = {"operator": {"cpu_seconds": 1.0, "peak_rss_mb": 9.0}}
    r.error = "boom"
    back = Round.from_json(json.loads(json.dumps(r.to_json())))
    assert back == r


def test_latest_keeps_a_reruns_rounds_instead_of_the_earlier_parts(tmp_path: Path) -> None:
    """A built-in arm rerun at its top level only (its restart measured again)."""
    first = _part(tmp_path, "kcm", Arm.BUILTIN, (5000, 10000), 400.0, "aaa")
    rerun = _part(tmp_path, "kcm-again", Arm.BUILTIN, (10000,), 500.0, "bbb")
    operator = _part(tmp_path, "op", Arm.OPERATOR, (10000,), 200.0, "ccc")
    argv = [str(first), str(rerun), str(operator), "--stem", "all", "--out", str(tmp_path)]
    assert combine.main([*argv, "--latest"]) == 0
    data = json.loads((tmp_path / "all.json").read_text())
    kept = sorted(
        (r["scenario"], r["arm"], r["metrics"]["controller_rss_mb"])
        for r in data["rounds"]["defaults"]
    )
    assert kept == [
        ("s8-10000", "Job", 500.0),
        ("s8-10000", "ParallelJob", 200.0),
        ("s8-5000", "Job", 400.0),
    ]
