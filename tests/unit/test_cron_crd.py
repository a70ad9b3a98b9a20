"""hack/cron_crd.py: the ParallelCronJob CRD's jobTemplate.spec is the ParallelJob's spec
schema, its rules included, but none that reads oldSelf (a jobTemplate may change)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cron_crd", REPO / "hack" / "cron_crd.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _module()


def _schema(path: Path) -> dict[str, Any]:
    crd = yaml.safe_load(path.read_text())
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def test_the_committed_crd_is_the_generated_one() -> None:
    assert GEN.main(["cron_crd.py", "--check"]) == 0, "run python3 hack/cron_crd.py"


def test_the_job_template_spec_is_the_parallel_job_spec_without_transition_rules() -> None:
    job = _schema(GEN.JOB_CRD)["properties"]["spec"]
    template = _schema(GEN.OUT)["properties"]["spec"]["properties"]["jobTemplate"]
    spec = template["properties"]["spec"]
    assert set(spec["properties"]) == set(job["properties"])
    assert "oldSelf" not in str(spec)
    kept = [r["rule"] for r in spec.get("x-kubernetes-validations", [])]
    expected = [
        r["rule"] for r in job.get("x-kubernetes-validations", []) if "oldSelf" not in str(r)
    ]
    assert kept == expected and kept, "the rules that do not compare versions stay"


def test_transition_rules_are_dropped_at_any_depth() -> None:
    node = {
        "x-kubernetes-validations": [{"rule": "self == oldSelf"}, {"rule": "self > 0"}],
        "properties": {"a": {"x-kubernetes-validations": [{"rule": "self == oldSelf"}]}},
    }
    assert GEN.without_transition_rules(node) == {
        "x-kubernetes-validations": [{"rule": "self > 0"}],
        "properties": {"a": {}},
    }
