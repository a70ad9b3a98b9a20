"""Writes the ParallelJob CRD's pod template immutability rule from the CRD's own schema.

The rule is upstream's validatePodTemplateUpdate with Kubernetes 1.36's options
(pkg/registry/batch/job/strategy.go, shouldAllowMutablePodTemplate): a job's template
cannot change, except while the job is suspended with no active pods and has either
never started or its Suspended condition True; then its labels, annotations,
nodeSelector, tolerations, schedulingGates and affinity.nodeAffinity may change, and so
may the
resources of each container and init container (by index, when the lists keep their
length and names). CEL cannot compare a template with some of its fields ignored, so
the rule names every other field the schema declares; generated, it cannot miss one
a newer PodSpec adds to the schema. The containers and init containers it leaves to the
ValidatingAdmissionPolicy in crds/ (template-policy.yaml): a container's fields are
untyped in the schema (so that CEL compares them exactly) and so out of a CRD rule's
reach, and even their names, unbounded, cost more than a CRD rule may spend.

Usage: python3 hack/template_rule.py [--check]   (--check: fail if the CRD is stale)
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

CRD = Path(__file__).resolve().parent.parent / "crds" / "paralleljob.dev_paralleljobs.yaml"
#: The rule's first line, and the line that follows its text in the CRD.
START = "                self.spec.template == oldSelf.spec.template\n"
END = "              fieldPath: .spec.template\n"
INDENT = " " * 16

#: The pod spec fields a suspended job's template may change (AllowMutableSchedulingDirectives);
#: affinity is compared without its nodeAffinity.
MUTABLE_SPEC = {"nodeSelector", "tolerations", "schedulingGates"}
#: Compared by the policy, each container without its resources (AllowMutablePodResources).
CONTAINER_LISTS = ("containers", "initContainers")
#: Field names that are CEL reserved words, as a rule must spell them.
CEL_ESCAPES = {"namespace": "__namespace__"}


def template_schema(crd: dict[str, Any]) -> dict[str, Any]:
    root = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return dict(root["properties"]["spec"]["properties"]["template"]["properties"]["spec"])


def same(new: str, old: str, field: str, required: bool) -> str:
    """``new.field`` equals ``old.field``, either unset on both sides."""
    if required:
        return f"{new}.{field} == {old}.{field}"
    return (
        f"(has({new}.{field})\n"
        f"       ? has({old}.{field})\n"
        f"         && {new}.{field} == {old}.{field}\n"
        f"       : !(has({old}.{field})))"
    )


def same_affinity(new: str, old: str) -> str:
    """affinity without nodeAffinity: its other members each equal."""
    parts = []
    for member in ("podAffinity", "podAntiAffinity"):
        parts.append(
            f"(has({new}.affinity) && has({new}.affinity.{member})\n"
            f"       ? has({old}.affinity) && has({old}.affinity.{member})\n"
            f"         && {new}.affinity.{member} == {old}.affinity.{member}\n"
            f"       : !(has({old}.affinity) && has({old}.affinity.{member})))"
        )
    return "\n&& ".join(parts)


def same_metadata(crd: dict[str, Any]) -> list[str]:
    """The template's metadata but its labels and annotations, field by field (upstream
    leaves the metadata of a template that may change to ValidatePodTemplateSpec;
    the rule keeps what no pod would take, such as a namespace, as it was)."""
    root = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    meta = root["properties"]["spec"]["properties"]["template"]["properties"]["metadata"]
    checks = []
    new, old = "self.spec.template.metadata", "oldSelf.spec.template.metadata"
    for name in sorted(set(meta["properties"]) - {"labels", "annotations"}):
        field = CEL_ESCAPES.get(name, name)
        checks.append(
            f"(has({new}) && has({new}.{field})\n"
            f"       ? has({old}) && has({old}.{field})\n"
            f"         && {new}.{field} == {old}.{field}\n"
            f"       : !(has({old}) && has({old}.{field})))"
        )
    return checks


def rule(crd: dict[str, Any]) -> str:
    schema = template_schema(crd)
    new, old = "self.spec.template.spec", "oldSelf.spec.template.spec"
    required = set(schema.get("required", []))
    checks = same_metadata(crd)
    for field in sorted(schema["properties"]):
        if field in MUTABLE_SPEC:
            continue
        if field == "affinity":
            checks.append(same_affinity(new, old))
        elif field in CONTAINER_LISTS:
            continue
        else:
            checks.append(same(new, old, field, field in required))
    allowed = (
        "(has(oldSelf.spec.suspend) && oldSelf.spec.suspend\n"
        "    && (!has(oldSelf.status) || !has(oldSelf.status.startTime)\n"
        "        || (has(oldSelf.status.conditions) && oldSelf.status.conditions.exists(c,\n"
        "            c.type == 'Suspended' && c.status == 'True')))\n"
        "    && (!has(oldSelf.status) || !has(oldSelf.status.active)"
        " || oldSelf.status.active == 0)\n"
        "    && " + "\n&& ".join(checks).replace("\n", "\n    ") + ")"
    )
    return "self.spec.template == oldSelf.spec.template\n|| " + allowed + "\n"


def render(text: str, crd: dict[str, Any]) -> str:
    """The CRD's text with the rule replaced."""
    start = text.index(START)
    end = text.index(END, start)
    body = "".join(INDENT + line if line else line for line in rule(crd).splitlines(True))
    return text[:start] + body + text[end:]


def main(argv: list[str]) -> int:
    text = CRD.read_text()
    wanted = render(text, yaml.safe_load(text))
    if argv[1:] == ["--check"]:
        if wanted != text:
            print(f"{CRD}: the template rule is stale: run python3 hack/template_rule.py")
            return 1
        return 0
    CRD.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
