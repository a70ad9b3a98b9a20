"""What the fuzz tests send: ParallelJob bodies and merge patches as hypothesis strategies.

An example starts from a spec whose run is short and bounded on the kwok node (at most
MAX_PODS pods, or suspended, or parallelism 0) and may carry defects. Each defect says
what the API server's answer must name: a value the API must refuse (``rejected``), or
one only pod validation refuses, so that the job is accepted and reports
PodCreationFailed (``pod_refused``). A valid example has huge numbers only where they
start no run (int32 max completions of a suspended job); the rest are defects. Pure:
no cluster.
"""

from __future__ import annotations

import copy
import math
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from tests.e2e.support import kwok_template
from tests.support.stub_api.patch import merge_patch

Json = Any
Path = tuple[str | int, ...]

GROUP, VERSION, PLURAL, KIND = "paralleljob.dev", "v1alpha1", "paralleljobs", "ParallelJob"
API_VERSION = f"{GROUP}/{VERSION}"

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
#: The most pods a valid example's run may create (each a 0-1 s kwok pod): seconds.
MAX_PODS = 5
#: Failing pods are replaced after a back-off (PJ_POD_BACKOFF_BASE_SECONDS, small in the
#: fuzz): a job whose pods fail is valid only with a backoffLimit that ends it soon.
MAX_BACKOFF_LIMIT_WHEN_FAILING = 6
#: The CRD's own limit: the name is the value of the pods' job-name label.
MAX_NAME = 63
#: A DNS subdomain (metadata.name of any object).
MAX_DNS_SUBDOMAIN = 253

#: The integer fields of spec: (minimum, bits of their Go type in batch/v1).
INT_FIELDS: dict[str, tuple[int, int]] = {
    "parallelism": (0, 32),
    "completions": (0, 32),
    "backoffLimit": (0, 32),
    "ttlSecondsAfterFinished": (0, 32),
    # 0 is valid since Kubernetes 1.34 (fails the job at once), as for a Job.
    "activeDeadlineSeconds": (0, 64),
}
#: Known properties by the path of their object, so that an "unknown" field is unknown.
KNOWN_FIELDS: dict[Path, frozenset[str]] = {
    (): frozenset({"apiVersion", "kind", "metadata", "spec", "status"}),
    ("spec",): frozenset(
        {
            *INT_FIELDS,
            "suspend",
            "template",
            "completionMode",
            "backoffLimitPerIndex",
            "maxFailedIndexes",
            "podFailurePolicy",
            "successPolicy",
            "podReplacementPolicy",
            "managedBy",
            "podFailureBackoff",
            "podStartDeadlineSeconds",
            "restartPolicy",
        }
    ),
    ("spec", "template"): frozenset({"metadata", "spec"}),
}


class _Delete:
    """The value of a defect that removes its field."""

    def __repr__(self) -> str:
        return "<deleted>"

    def __deepcopy__(self, memo: dict[int, object]) -> _Delete:
        return self  # one marker, compared by identity


DELETE = _Delete()


@dataclass(frozen=True)
class Defect:
    """One thing wrong with an input: ``value`` at ``path`` (DELETE: the field removed).

    ``rejected``: the API must refuse the input with a message naming one of these.
    ``pod_refused``: the API accepts the job and refuses its pods, naming one of these
    (pod paths: ``spec.containers[0].name``); the job reports PodCreationFailed.
    """

    path: Path
    value: Json
    rejected: tuple[str, ...] = ()
    pod_refused: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """For hypothesis' statistics: the field and the kind of value."""
        where = ".".join(str(p) for p in self.path)
        kind = "missing" if self.value is DELETE else type(self.value).__name__
        return f"{where}={kind}"


@dataclass(frozen=True)
class Example:
    """A create (``patch`` None) or a merge patch of a job created from ``body`` first."""

    body: Json
    defects: tuple[Defect, ...] = ()
    patch: Json | None = None

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    @property
    def rejected(self) -> tuple[str, ...]:
        """What the API's refusal must name one of (empty: it must accept)."""
        return tuple(n for d in self.defects for n in d.rejected)

    @property
    def pod_refused(self) -> tuple[str, ...]:
        return tuple(n for d in self.defects for n in d.pod_refused)

    def spec_after(self) -> Json:
        """The spec the API server would store (when it accepts the example)."""
        spec = self.body.get("spec")
        if self.patch is not None:
            return merge_patch(spec, self.patch.get("spec", spec))
        return spec


# ---------------------------------------------------------------- JSON helpers


def put(doc: Json, path: Path, value: Json) -> None:
    """Sets ``value`` at ``path`` in ``doc`` (DELETE removes it), creating objects on the way."""
    *parents, last = path
    node = doc
    for key in parents:
        node = node[key] if isinstance(key, int) else node.setdefault(key, {})
    if value is DELETE:
        if isinstance(node, dict):
            node.pop(last, None)
        return
    node[last] = value


def with_defects(doc: Json, defects: Sequence[Defect]) -> Json:
    doc = copy.deepcopy(doc)
    for defect in defects:
        put(doc, defect.path, copy.deepcopy(defect.value))
    return doc


def without_nulls(doc: Json) -> Json:
    """The object as stored: the API server prunes null fields that are not nullable."""
    if isinstance(doc, Mapping):
        return {k: without_nulls(v) for k, v in doc.items() if v is not None}
    if isinstance(doc, list):
        return [without_nulls(v) for v in doc]
    return doc


# ---------------------------------------------------------------- what a spec does


def _int_or(spec: Mapping[str, Any], key: str, default: int | None) -> int | None:
    value = spec.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def effective_counts(spec: Mapping[str, Any]) -> tuple[int, int | None]:
    """(parallelism, completions) with a Job's defaults: both unset means both 1."""
    parallelism = _int_or(spec, "parallelism", None)
    completions = _int_or(spec, "completions", None)
    if parallelism is None and completions is None:
        return 1, 1
    return (1 if parallelism is None else parallelism), completions


def pods_wanted(spec: Mapping[str, Any]) -> bool:
    """Whether the job tries to create a pod at all (else it idles or completes at once)."""
    parallelism, completions = effective_counts(spec)
    return spec.get("suspend") is not True and parallelism > 0 and completions != 0


def pods_fail(spec: Mapping[str, Any]) -> bool:
    template = spec.get("template") or {}
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get("kwok.paralleljob.dev/exit-code", "0")) != "0"


def bounded(spec: Mapping[str, Any]) -> bool:
    """A run of ``spec`` on kwok ends or idles within seconds: suspended, parallelism 0,
    or at most MAX_PODS pods in all, and failing pods end it after a few failures."""
    if not pods_wanted(spec):
        return True
    parallelism, completions = effective_counts(spec)
    # A work queue runs `parallelism` pods until the first success, and no more.
    pods = parallelism if completions is None else completions
    if pods > MAX_PODS:
        return False
    backoff_limit = _int_or(spec, "backoffLimit", 6)
    return not pods_fail(spec) or (backoff_limit or 0) <= MAX_BACKOFF_LIMIT_WHEN_FAILING


# ---------------------------------------------------------------- valid input


def valid_templates(
    duration: st.SearchStrategy[str] | None = None,
) -> st.SearchStrategy[Json]:
    """kwok pods that end in 0-1 s, succeeding or failing, either restartPolicy."""

    @st.composite
    def build(draw: st.DrawFn) -> Json:
        fails = draw(st.sampled_from([False, False, False, True]))
        template = kwok_template(
            draw(duration or st.sampled_from(["0s", "0s", "1s"])), exit_code=1 if fails else 0
        )
        template["spec"]["restartPolicy"] = draw(st.sampled_from(["Never", "OnFailure"]))
        if draw(st.booleans()):
            template["metadata"]["labels"] = {"app": "fuzz"}
        if draw(st.booleans()):
            # Fields the CRD passes through to the pod, as a Job's template does.
            template["spec"]["terminationGracePeriodSeconds"] = draw(st.integers(0, 30))
        return template

    return build()


def _optional(values: st.SearchStrategy[Json]) -> st.SearchStrategy[Json]:
    """A value, or the field absent (None here), or an explicit JSON null (pruned)."""
    return st.one_of(st.none(), st.just(DELETE), values)


@st.composite
def valid_specs(draw: st.DrawFn, *, patch_base: bool = False) -> Json:
    """A spec the API must accept and whose run is bounded; boundary values (0, int32
    max, int64 max) where they cannot make the run long. A patch base always sets
    parallelism, so that the operator writes no default under the patch."""
    small = st.integers(0, MAX_PODS)
    suspend = draw(st.sampled_from([None, False, False, True]))
    completions = draw(_optional(small))
    parallelism = draw(small if patch_base else _optional(small))
    if not patch_base:
        # Huge values where they cannot start a huge run.
        if suspend is True or parallelism == 0:
            completions = draw(st.sampled_from([completions, INT32_MAX]))
        if suspend is True or (isinstance(completions, int) and completions <= MAX_PODS):
            parallelism = draw(st.sampled_from([parallelism, INT32_MAX]))
    spec: Json = {
        "parallelism": parallelism,
        "completions": completions,
        "suspend": suspend,
        "backoffLimit": draw(_optional(st.sampled_from([0, 1, 2, 3, INT32_MAX]))),
        "activeDeadlineSeconds": draw(_optional(st.sampled_from([0, 1, 2, 5, 3600, INT64_MAX]))),
        "ttlSecondsAfterFinished": draw(_optional(st.sampled_from([0, 1, 2, INT32_MAX]))),
        "template": draw(valid_templates()),
    }
    # None: absent; DELETE: sent as an explicit null.
    spec = {k: (None if v is DELETE else v) for k, v in spec.items() if v is not None}
    # True first: hypothesis leans to a strategy's first, simplest value.
    if not patch_base and draw(st.sampled_from([True, False])):
        spec = draw(with_policies(spec))
    if not bounded(without_nulls(spec)):
        # Failing pods and a large backoffLimit: keep the failure quick.
        spec["backoffLimit"] = draw(st.integers(0, 3))
    return spec


#: The exit code of a failing template's pods (kwok_template's exit_code).
FAILING_EXIT_CODE = 1


def _pod_failure_rules(per_index: bool) -> st.SearchStrategy[Json]:
    """Rules the API accepts. None ignores a failing pod's exit code: an ignored failure
    is replaced without being counted, for ever, as a Job's would be."""
    fails: Json = {"operator": "In", "values": [FAILING_EXIT_CODE]}
    rules: list[Json] = [
        {"action": "FailJob", "onExitCodes": fails},
        {"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [0]}},
        {"action": "Count", "onExitCodes": fails},
        {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [2, 3]}},
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
    ]
    if per_index:
        rules.append({"action": "FailIndex", "onExitCodes": fails})
    return st.sampled_from(rules)


def _success_rules(completions: int) -> st.SearchStrategy[Json]:
    """Rules the API accepts for an Indexed job of ``completions`` (at least 1)."""
    count = st.integers(1, completions)
    every = "0" if completions == 1 else f"0-{completions - 1}"  # an interval's ends differ
    return st.one_of(
        st.just({"succeededIndexes": "0"}),
        st.builds(lambda n: {"succeededCount": n}, count),
        st.builds(lambda n: {"succeededIndexes": every, "succeededCount": n}, count),
    )


@st.composite
def with_policies(draw: st.DrawFn, spec: Json) -> Json:
    """``spec`` with the rest of batch/v1 (issue 12) in combinations the API accepts:
    Indexed completion with per-index back-off and a success policy, a pod failure
    policy, a pod replacement policy. Runs stay bounded: at most MAX_PODS indexes."""
    spec = copy.deepcopy(spec)
    per_index = False
    if draw(st.sampled_from([True, False])):
        completions = draw(st.integers(1, MAX_PODS))
        spec.update(completionMode="Indexed", completions=completions)
        if not isinstance(spec.get("parallelism"), int) or spec["parallelism"] > MAX_PODS:
            spec["parallelism"] = draw(st.integers(0, MAX_PODS))
        limit = draw(st.sampled_from([None, 0, 1]))
        if limit is not None:
            per_index = True
            spec["backoffLimitPerIndex"] = limit
            if draw(st.booleans()):
                spec["maxFailedIndexes"] = draw(st.integers(0, completions))
        if draw(st.booleans()):
            spec["successPolicy"] = {"rules": [draw(_success_rules(completions))]}
    elif draw(st.booleans()):
        spec["completionMode"] = "NonIndexed"
    replacement = ["Failed"]
    if draw(st.booleans()):
        spec["template"]["spec"]["restartPolicy"] = "Never"
        rules = st.lists(_pod_failure_rules(per_index), min_size=1, max_size=2, unique_by=str)
        spec["podFailurePolicy"] = {"rules": draw(rules)}
    elif not per_index:
        replacement.append("TerminatingOrFailed")
    if draw(st.booleans()):
        spec["podReplacementPolicy"] = draw(st.sampled_from(replacement))
    return spec


name_chars = st.sampled_from(string.ascii_lowercase + string.digits)


@st.composite
def dns_labels(draw: st.DrawFn, size: int) -> str:
    """A DNS-1123 label of exactly ``size`` characters (``size`` >= 1)."""
    if size == 1:
        return str(draw(name_chars))
    middle = draw(st.text(name_chars | st.just("-"), min_size=size - 2, max_size=size - 2))
    return str(draw(name_chars)) + middle + str(draw(name_chars))


@st.composite
def valid_names(draw: st.DrawFn) -> str:
    """A lowercase DNS subdomain of 1 to MAX_NAME characters, often at the limit."""
    size = draw(st.sampled_from([1, 2, MAX_NAME - 1, MAX_NAME]) | st.integers(1, MAX_NAME))
    if size >= 3 and draw(st.booleans()):
        head = draw(st.integers(1, size - 2))
        return str(draw(dns_labels(head))) + "." + str(draw(dns_labels(size - head - 1)))
    return str(draw(dns_labels(size)))


def indexed_pod_name_base(name: str, completions: int) -> str:
    """``name`` cut so that an Indexed job's pod hostnames, ``<name>-<index>``, are DNS
    labels (no dots, at most 63 characters), as the API requires of such a job."""
    base = name.replace(".", "-")[: MAX_NAME - 1 - len(str(max(completions - 1, 0)))]
    return base.rstrip("-")


def job_body(name: str, spec: Json) -> Json:
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": name}, "spec": spec}


# ---------------------------------------------------------------- defects


def _not_integral(value: float) -> bool:
    return math.isfinite(value) and not value.is_integer()


#: JSON values of every type but integer (strings of digits too: "5" is not 5).
non_integers: st.SearchStrategy[Json] = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["5", "-1", "2147483648", "1e3", "0x10", ""]),
    st.floats(allow_nan=False, allow_infinity=False).filter(_not_integral),
    st.booleans(),
    st.lists(st.integers(-3, 3), max_size=2),
    st.dictionaries(
        st.text(string.ascii_lowercase, min_size=1, max_size=4), st.integers(), max_size=1
    ),
)
#: JSON values of every type but object.
non_objects: st.SearchStrategy[Json] = st.one_of(
    st.text(max_size=8), st.integers(), st.booleans(), st.lists(st.integers(), max_size=2)
)


def _too_big(name: str) -> st.SearchStrategy[int]:
    """Beyond the range of the field's Go type in batch/v1 (int32 or int64)."""
    _, bits = INT_FIELDS[name]
    top = 2 ** (bits - 1) - 1
    edges = [v for v in (2**31, 2**32, 2**40, 2**53 + 1, 2**63, 2**64, 10**30) if v > top]
    return st.sampled_from(edges) | st.integers(min_value=top + 1, max_value=2**70)


def _too_small(minimum: int) -> st.SearchStrategy[int]:
    edges = [minimum - 1, -1, -(2**31), -(2**31) - 1, -(2**63), -(2**64)]
    return st.sampled_from(sorted({e for e in edges if e < minimum})) | st.integers(
        max_value=minimum - 1, min_value=-(2**70)
    )


@st.composite
def int_field_defects(draw: st.DrawFn) -> Defect:
    """A spec integer below its minimum, beyond its Go type's range, or not an integer."""
    name = draw(st.sampled_from(sorted(INT_FIELDS)))
    minimum, _ = INT_FIELDS[name]
    value = draw(st.one_of(_too_small(minimum), _too_big(name), non_integers))
    return Defect(("spec", name), value, rejected=(f"spec.{name}",))


@st.composite
def suspend_defects(draw: st.DrawFn) -> Defect:
    value = draw(st.one_of(st.text(max_size=6), st.integers(), st.just("true"), st.just([True])))
    return Defect(("spec", "suspend"), value, rejected=("spec.suspend",))


@st.composite
def structure_defects(draw: st.DrawFn) -> Defect:
    """A required part of the job missing or of the wrong type."""
    path: Path = draw(
        st.sampled_from(
            [
                ("spec",),
                ("spec", "template"),
                ("spec", "template", "spec"),
                ("spec", "template", "spec", "containers"),
                ("spec", "template", "spec", "restartPolicy"),
            ]
        )
    )
    needle = ".".join(str(p) for p in path)
    if draw(st.booleans()):
        if draw(st.booleans()):
            # Optional, but an object when present.
            metadata: Path = ("spec", "template", "metadata")
            return Defect(metadata, draw(non_objects), rejected=("spec.template.metadata",))
        return Defect(path, DELETE, rejected=(needle,))
    value: Json
    if path[-1] == "containers":
        value = draw(st.just([]) | non_objects.filter(lambda v: not isinstance(v, list)))
    elif path[-1] == "restartPolicy":
        value = draw(st.just(1) | st.just(["Never"]))
    else:
        value = draw(non_objects)
    return Defect(path, value, rejected=(needle,))


@st.composite
def restart_policy_defects(draw: st.DrawFn) -> Defect:
    """Always is a pod's default but never a Job's; anything else is no policy at all."""
    value = draw(st.sampled_from(["Always", "", "never", "ALWAYS", "OnSuccess"]) | st.text())
    path: Path = ("spec", "template", "spec", "restartPolicy")
    if value in ("Never", "OnFailure"):
        value = "Always"
    return Defect(path, value, rejected=("spec.template.spec.restartPolicy",))


@st.composite
def name_defects(draw: st.DrawFn) -> Defect:
    """Too long for the CRD (64..253: a valid DNS name still), too long for any object
    (254+), or not a lowercase DNS subdomain."""
    long = draw(
        st.sampled_from([MAX_NAME + 1, 100, MAX_DNS_SUBDOMAIN, MAX_DNS_SUBDOMAIN + 1, 1000])
    )
    too_long = str(draw(dns_labels(min(long, 63)))) * (long // 63 + 1)
    bad = draw(
        st.sampled_from(
            [
                too_long[:long],
                "UPPER",
                "under_score",
                "-lead",
                "trail-",
                "dot..dot",
                "trail.",
                "sp ace",
                "ünïcode",
                "",
            ]
        )
    )
    return Defect(("metadata", "name"), bad, rejected=("metadata.name",))


@st.composite
def unknown_field_defects(draw: st.DrawFn) -> Defect:
    """A field the schema does not know: refused by strict field validation (as kubectl
    does by default), where the schema does not keep unknown fields."""
    parent: Path = draw(st.sampled_from(sorted(KNOWN_FIELDS)))
    key = draw(st.from_regex(r"[a-z][a-zA-Z0-9]{2,15}", fullmatch=True))
    if key in KNOWN_FIELDS[parent]:
        key = f"bogus{key}"
    path = (*parent, key)
    shown = ".".join(str(p) for p in path)
    value = draw(st.integers() | st.text(max_size=5) | st.booleans())
    return Defect(path, value, rejected=(f'unknown field "{shown}"',))


@st.composite
def pod_defects(draw: st.DrawFn) -> Defect:
    """What the CRD's schema lets through (the pod spec is kept as it is) and pod
    validation refuses when the operator creates the job's pod."""
    container: Path = ("spec", "template", "spec", "containers", 0)
    choices: list[Defect] = [
        Defect(
            (*container, "name"),
            draw(st.sampled_from(["Bad_Name", "UPPER", "-x", "a" * 64])),
            pod_refused=("spec.containers[0].name",),
        ),
        Defect((*container, "image"), DELETE, pod_refused=("spec.containers[0].image",)),
        Defect(
            (*container, "resources"),
            {"requests": {"cpu": draw(st.sampled_from(["-1", "-100m"]))}},
            pod_refused=("spec.containers[0].resources.requests[cpu]",),
        ),
        Defect(
            ("spec", "template", "spec", "activeDeadlineSeconds"),
            draw(st.sampled_from([0, -1])),
            pod_refused=("spec.activeDeadlineSeconds",),
        ),
        Defect(
            ("spec", "template", "metadata", "labels"),
            {"fuzz": draw(st.sampled_from(["not valid!", "-x", "a" * 64]))},
            pod_refused=("metadata.labels",),
        ),
    ]
    return draw(st.sampled_from(choices))


@st.composite
def label_type_defects(draw: st.DrawFn) -> Defect:
    """A pod label that is not a string: the CRD types the template's labels as a Job's
    ObjectMeta does (since the schema of Kubernetes 1.36's template rule)."""
    value = draw(st.sampled_from([5, True, ["x"]]))
    path: Path = ("spec", "template", "metadata", "labels")
    return Defect(path, {"fuzz": value}, rejected=("spec.template.metadata.labels.fuzz",))


def refused_defects() -> st.SearchStrategy[Defect]:
    """Defects the API server must refuse, as it refuses them in a batch/v1 Job."""
    return st.one_of(
        label_type_defects(),
        int_field_defects(),
        suspend_defects(),
        structure_defects(),
        restart_policy_defects(),
        name_defects(),
        unknown_field_defects(),
    )


@st.composite
def creations(draw: st.DrawFn) -> Example:
    """A job body: valid (a third), with a defect only pod validation sees (a sixth), or
    with one or two defects the API must refuse (half)."""
    spec = draw(valid_specs())
    name = draw(valid_names())
    if spec.get("completionMode") == "Indexed":
        name = indexed_pod_name_base(name, spec["completions"])
    body = job_body(name, spec)
    kind = draw(st.sampled_from(["valid", "refused", "pod", "refused", "valid", "refused"]))
    if kind == "valid":
        return Example(body)
    if kind == "pod":
        # A job that wants pods, so that their refusal shows.
        wanting: Json = {"suspend": False, "parallelism": draw(st.integers(1, MAX_PODS))}
        if body["spec"].get("completionMode") == "Indexed":  # its completions are required
            wanting["completions"] = body["spec"]["completions"]
        else:
            wanting["completions"] = draw(st.none() | st.integers(1, MAX_PODS))
        body["spec"].update(wanting)
        defect = draw(pod_defects())
        return Example(with_defects(body, [defect]), (defect,))
    defects = draw(st.lists(refused_defects(), min_size=1, max_size=2))
    # A spec missing or replaced makes later defects inside it meaningless.
    defects = _consistent(defects)
    return Example(with_defects(body, defects), tuple(defects))


def _consistent(defects: Sequence[Defect]) -> list[Defect]:
    """Drops a defect under the path of an earlier one that removed or replaced it."""
    kept: list[Defect] = []
    for defect in defects:
        covered = any(
            defect.path[: len(k.path)] == k.path or k.path[: len(defect.path)] == defect.path
            for k in kept
        )
        if not covered:
            kept.append(defect)
    return kept


# ---------------------------------------------------------------- patches


@dataclass(frozen=True)
class _Change:
    value: Json
    defect: Defect | None = None


@st.composite
def _spec_change(draw: st.DrawFn, key: str, base: Mapping[str, Any], bad: bool) -> _Change:
    """One field of a merge patch of ``base``: a valid change or a removal (null), or,
    when ``bad``, a defect."""
    if key == "completions":
        old = base.get("completions")
        if not bad:
            return _Change(old)
        new = draw((st.none() | st.integers(0, MAX_PODS)).filter(lambda v: v != old))
        # Immutable: set, changed or removed, the API refuses it (a Job's rule).
        return _Change(new, Defect(("spec", key), new, rejected=("spec.completions",)))
    if key == "template":
        # The template is immutable, as a Job's (the scheduling directives of a job that
        # has never started aside): a valid patch leaves it as it is.
        if not bad:
            return _Change(base["template"])
        removed = Defect(("spec", key), None, rejected=("spec.template",))
        policy = draw(restart_policy_defects())
        # A merge patch keeps what it does not name: it must change the merged template.
        changed = draw(
            valid_templates().filter(lambda t: merge_patch(base["template"], t) != base["template"])
        )
        return draw(
            st.sampled_from(
                [
                    _Change(None, removed),
                    _Change({"spec": {"restartPolicy": policy.value}}, policy),
                    _Change(changed, Defect(("spec", key), changed, rejected=("spec.template",))),
                ]
            )
        )
    if key == "suspend":
        if not bad:
            return _Change(draw(st.sampled_from([True, False, None])))
        defect = draw(suspend_defects())
        return _Change(defect.value, defect)
    minimum, _ = INT_FIELDS[key]
    if not bad:
        valid = {
            "parallelism": st.integers(0, MAX_PODS),
            "backoffLimit": st.integers(0, 3),
            "activeDeadlineSeconds": st.sampled_from([0, 1, 5, 3600, INT64_MAX]),
            "ttlSecondsAfterFinished": st.sampled_from([0, 2, INT32_MAX]),
        }[key]
        return _Change(draw(st.none() | valid))
    value = draw(st.one_of(_too_small(minimum), _too_big(key), non_integers))
    return _Change(value, Defect(("spec", key), value, rejected=(f"spec.{key}",)))


@st.composite
def patches(draw: st.DrawFn) -> Example:
    """A running or suspended job, then a merge patch: one to three spec fields changed
    or removed (null), valid (half) or with one defect, an unknown field, or the whole
    spec removed."""
    base = without_nulls(draw(valid_specs(patch_base=True)))
    body = job_body(draw(valid_names()), base)
    kind = draw(
        st.sampled_from(["valid", "field", "valid", "unknown", "valid", "field", "no spec"])
    )
    if kind == "no spec":
        removed = Defect(("spec",), None, rejected=("spec",))
        return Example(body, (removed,), patch={"spec": None})
    fields = [*INT_FIELDS, "suspend", "template"]
    keys = draw(st.lists(st.sampled_from(fields), min_size=1, max_size=3, unique=True))
    changes = {
        k: draw(_spec_change(k, base, bad=kind == "field" and i == 0)) for i, k in enumerate(keys)
    }
    spec_patch = {k: c.value for k, c in changes.items()}
    defects = [c.defect for c in changes.values() if c.defect is not None]
    if kind == "unknown":
        key = draw(st.from_regex(r"[a-z][a-zA-Z0-9]{2,15}", fullmatch=True))
        key = f"bogus{key}" if key in KNOWN_FIELDS[("spec",)] else key
        spec_patch[key] = 1
        defects.append(Defect(("spec", key), 1, rejected=(f'unknown field "spec.{key}"',)))
    return Example(body, tuple(defects), patch={"spec": spec_patch})


def examples() -> st.SearchStrategy[Example]:
    """What the fuzz test sends: creates and patches, bounded whenever valid."""
    return st.one_of(creations(), patches()).filter(
        lambda e: bool(e.rejected) or bounded(without_nulls(e.spec_after()) or {})
    )
