"""The resources the stub serves and the discovery documents that describe them: the
core pods, events and namespaces, batch/v1 Jobs, coordination.k8s.io Leases, the CRDs
(kopf watches them) and the ParallelJob and ParallelCronJob resources as the CRDs in
``crds/`` define them (their group, served versions, names and subresources read from
the file, so that a change of a CRD needs no change here)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml

from .store import Json, Kind

REPO_ROOT = Path(__file__).resolve().parents[3]
CRD_FILE = REPO_ROOT / "crds" / "paralleljob.dev_paralleljobs.yaml"
#: The ParallelCronJob CRD: served so that the operator's cron informers list (none).
CRON_CRD_FILE = REPO_ROOT / "crds" / "paralleljob.dev_parallelcronjobs.yaml"

#: What kube-apiserver v1.37 says its verbs are, by kind of resource.
_ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
_SUB_VERBS = ["get", "patch", "update"]

POD = Kind("", "v1", "pods", "Pod", subresources=("status",), singular="pod", short_names=("po",))
EVENT = Kind("", "v1", "events", "Event", kept=False, singular="event", short_names=("ev",))
NAMESPACE = Kind(
    "", "v1", "namespaces", "Namespace", namespaced=False, singular="namespace", short_names=("ns",)
)
JOB = Kind("batch", "v1", "jobs", "Job", subresources=("status",), singular="job")
LEASE = Kind("coordination.k8s.io", "v1", "leases", "Lease", singular="lease")
CRD = Kind(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    "CustomResourceDefinition",
    namespaced=False,
    subresources=("status",),
    singular="customresourcedefinition",
    short_names=("crd", "crds"),
)


@dataclass(frozen=True)
class CustomResource:
    """The ParallelJob CRD: its definition and the resource of each served version."""

    definition: Json
    kinds: tuple[Kind, ...]

    @property
    def storage(self) -> Kind:
        """The version the jobs are created in (the storage version)."""
        for version, kind in zip(self.definition["spec"]["versions"], self.kinds, strict=True):
            if version.get("storage"):
                return kind
        return self.kinds[0]


def load_crd(path: Path = CRD_FILE) -> CustomResource:
    definition: Json = yaml.safe_load(path.read_text())
    spec = definition["spec"]
    names = spec["names"]
    kinds = tuple(
        Kind(
            spec["group"],
            version["name"],
            names["plural"],
            names["kind"],
            namespaced=spec.get("scope", "Namespaced") == "Namespaced",
            subresources=tuple(sorted((version.get("subresources") or {}).keys())),
            typed_list=False,
            singular=names.get("singular", ""),
            short_names=tuple(names.get("shortNames") or ()),
            categories=tuple(names.get("categories") or ()),
        )
        for version in spec["versions"]
        if version.get("served", True)
    )
    return CustomResource(definition, kinds)


def builtin_kinds() -> tuple[Kind, ...]:
    return (POD, EVENT, NAMESPACE, JOB, LEASE, CRD)


# -- discovery ---------------------------------------------------------------------------
def version_info() -> Json:
    """/version: what the local cluster's kube-apiserver says (hack/versions.env's
    KUBERNETES_VERSION, which the operator checks at start-up)."""
    pins = (REPO_ROOT / "hack" / "versions.env").read_text()
    found = re.search(r"^KUBERNETES_VERSION=v(\d+)\.(\d+)\.\d+", pins, re.M)
    if found is None:
        raise ValueError("hack/versions.env has no KUBERNETES_VERSION=vX.Y.Z")
    return {
        "major": found.group(1),
        "minor": found.group(2),
        "gitVersion": found.group(0).split("=", 1)[1],
        "gitCommit": "stub",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


def _resource_entries(kind: Kind) -> list[Json]:
    main: Json = {
        "name": kind.plural,
        "singularName": kind.singular,
        "namespaced": kind.namespaced,
        "kind": kind.kind,
        "verbs": _ALL_VERBS,
    }
    if kind.short_names:
        main["shortNames"] = list(kind.short_names)
    if kind.categories:
        main["categories"] = list(kind.categories)
    subs = [
        {
            "name": f"{kind.plural}/{sub}",
            "singularName": "",
            "namespaced": kind.namespaced,
            "kind": "Scale" if sub == "scale" else kind.kind,
            "verbs": _SUB_VERBS,
            **({"group": "autoscaling", "version": "v1"} if sub == "scale" else {}),
        }
        for sub in kind.subresources
    ]
    return [main, *subs]


def resource_list(group_version: str, kinds: Iterable[Kind]) -> Json:
    """/api/v1 or /apis/GROUP/VERSION: an APIResourceList."""
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": [
            e for k in kinds if k.api_version == group_version for e in _resource_entries(k)
        ],
    }


def core_versions() -> Json:
    return {"kind": "APIVersions", "versions": ["v1"]}


def _groups(kinds: Iterable[Kind]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for kind in kinds:
        if kind.group:
            versions = groups.setdefault(kind.group, [])
            if kind.version not in versions:
                versions.append(kind.version)
    return groups


def _group(name: str, versions: list[str]) -> Json:
    entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": entries, "preferredVersion": entries[0]}


def group_list(kinds: Iterable[Kind]) -> Json:
    """/apis: an APIGroupList of every group served."""
    groups = _groups(kinds)
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group(name, versions) for name, versions in sorted(groups.items())],
    }


def group(name: str, kinds: Iterable[Kind]) -> Json | None:
    """/apis/GROUP: one APIGroup, None when not served."""
    versions = _groups(kinds).get(name)
    if versions is None:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name, versions)}


def crd_status(definition: Json) -> Json:
    """What the API server reports of an established CRD."""
    names = definition["spec"]["names"]
    return {
        "acceptedNames": names,
        "conditions": [
            {"type": t, "status": "True", "reason": r, "message": m}
            for t, r, m in (
                ("NamesAccepted", "NoConflicts", "no conflicts found"),
                ("Established", "InitialNamesAccepted", "the initial names have been accepted"),
            )
        ],
        "storedVersions": [v["name"] for v in definition["spec"]["versions"] if v.get("storage")],
    }
