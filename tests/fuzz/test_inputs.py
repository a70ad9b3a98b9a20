"""The fuzz inputs keep their promises, without a cluster: a valid example's run is
bounded, every defect names what the API's answer must name, merge patches merge as the
API server merges them."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from tests.support.stub_api.patch import merge_patch

from .inputs import (
    DELETE,
    INT32_MAX,
    MAX_NAME,
    Defect,
    Example,
    bounded,
    examples,
    pods_wanted,
    with_defects,
    without_nulls,
)

pytestmark = [pytest.mark.fuzz]


@settings(max_examples=200, deadline=None)
@given(examples())
def test_an_example_is_refused_with_a_name_or_runs_bounded(ex: Example) -> None:
    for defect in ex.defects:
        assert defect.rejected or defect.pod_refused, defect
    if ex.rejected:
        return
    assert 1 <= len(ex.name) <= MAX_NAME
    spec = without_nulls(ex.spec_after())
    assert bounded(spec), spec
    if spec.get("completionMode") == "Indexed":
        hostname = f"{ex.name}-{spec['completions'] - 1}"
        assert len(hostname) <= MAX_NAME and "." not in hostname, hostname
    if ex.pod_refused:
        assert ex.patch is None and pods_wanted(spec)


def test_bounded_runs() -> None:
    template = {"metadata": {"annotations": {"kwok.paralleljob.dev/exit-code": "1"}}}
    assert bounded({"parallelism": 5, "completions": 5})
    assert bounded({"parallelism": INT32_MAX, "completions": 3})
    assert not bounded({"parallelism": INT32_MAX})  # a work queue of 2^31 pods
    assert not bounded({"parallelism": 1, "completions": INT32_MAX})
    assert bounded({"parallelism": 0, "completions": INT32_MAX})
    assert bounded({"suspend": True, "parallelism": INT32_MAX})
    assert bounded({"template": template, "backoffLimit": 3})
    assert not bounded({"template": template, "backoffLimit": INT32_MAX})
    assert not pods_wanted({"completions": 0}) and pods_wanted({})


def test_a_defect_that_deletes_a_field_deletes_it() -> None:
    body = {"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "x"}]}}}}
    image = Defect(("spec", "template", "spec", "containers", 0, "image"), DELETE)
    assert with_defects(body, [image]) == {
        "spec": {"template": {"spec": {"containers": [{"name": "main"}]}}}
    }


def test_merge_patch_is_rfc_7386() -> None:
    target = {"a": 1, "b": {"c": 2, "d": 3}}
    assert merge_patch(target, {"a": None, "b": {"c": 5}}) == {"b": {"c": 5, "d": 3}}
    assert merge_patch(target, {"b": [1]}) == {"a": 1, "b": [1]}
    assert merge_patch(target, None) is None
