"""hack/template_rule.py: the CRD's template immutability rule is generated from the
CRD's own schema, so a PodSpec field added to the schema is compared without anyone
remembering to (Kubernetes 1.36's validatePodTemplateUpdate; crds/template-policy.yaml
compares the containers)."""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "template_rule", REPO / "hack" / "template_rule.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RULE = _module()
CRD: dict[str, Any] = yaml.safe_load(RULE.CRD.read_text())


def test_the_crd_holds_the_rule_its_schema_makes() -> None:
    assert RULE.main(["template_rule.py", "--check"]) == 0, "run python3 hack/template_rule.py"


def test_every_pod_spec_field_but_the_mutable_ones_is_compared() -> None:
    rule = RULE.rule(CRD)
    for field in RULE.template_schema(CRD)["properties"]:
        compared = f"self.spec.template.spec.{field} == oldSelf.spec.template.spec.{field}"
        left_out = field in RULE.MUTABLE_SPEC or field in RULE.CONTAINER_LISTS
        assert (compared in rule) is not left_out or field == "affinity", field
    assert "affinity.podAffinity ==" in rule and "nodeAffinity" not in rule


def test_a_field_added_to_the_schema_is_compared() -> None:
    crd = copy.deepcopy(CRD)
    RULE.template_schema(crd)  # the same path as the rule reads
    root = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    pod_spec = root["properties"]["spec"]["properties"]["template"]["properties"]["spec"]
    pod_spec["properties"]["futureField"] = {"type": "string"}
    assert "self.spec.template.spec.futureField == oldSelf.spec.template.spec.futureField" in (
        RULE.rule(crd)
    )


def test_the_policy_says_what_the_crd_rule_says() -> None:
    policy = next(yaml.safe_load_all((REPO / "crds" / "template-policy.yaml").read_text()))
    root = CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    [crd_rule] = [
        r for r in root["x-kubernetes-validations"] if r.get("fieldPath") == ".spec.template"
    ]
    [validation] = policy["spec"]["validations"]
    assert validation["message"] == f"spec.template: {crd_rule['message']}"
