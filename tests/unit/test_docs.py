"""The documentation holds together: every relative link in README.md and docs/*.md
resolves (file and #anchor), every make target is in README's table, and the permissions
table in docs/deploy.md is the operator's ClusterRole. Pure: files only."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.docs import NAMESPACE_RBAC, RBAC_PAGE, REPO, Rule, documented_rbac

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.S)
_INLINE_LINK = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE_LINK = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M)
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$", re.M)
_HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.I)
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:|^//")


def _prose(text: str) -> str:
    """The text without fenced code blocks and code spans (links there are not links)."""
    return _CODE_SPAN.sub("", _FENCE.sub("", text))


def links(text: str) -> list[str]:
    """The targets of the inline and reference-style links (and images) in ``text``."""
    prose = _prose(text)
    return [*_INLINE_LINK.findall(prose), *_REFERENCE_LINK.findall(prose)]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text (code spans and links as their text),
    lowercase, without punctuation other than '-' and '_', spaces as '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").replace("*", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors a page defines: its headings' slugs (numbered when repeated, as GitHub
    does) and explicit ``<a name=...>``/``<a id=...>``."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, heading in _HEADING.findall(_FENCE.sub("", text)):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found | set(_HTML_ANCHOR.findall(text))


def broken_links(page: Path) -> list[str]:
    """The relative links of ``page`` whose file, or #anchor in a markdown file, is missing."""
    text = page.read_text()
    broken = []
    for target in links(text):
        if not target or _SCHEME.match(target):
            continue
        path, _, fragment = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
            continue
        if fragment and resolved.suffix == ".md" and fragment not in anchors(resolved.read_text()):
            broken.append(f"{target}: no such anchor")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(page: Path) -> None:
    assert broken_links(page) == []


def test_broken_links_finds_missing_files_and_anchors(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A page\n\n## The `x` setting: on/off\n")
    page = tmp_path / "README.md"
    page.write_text(
        "[ok](docs/a.md) [ok](docs/a.md#the-x-setting-onoff) [ok](#top) [ok](https://x.io/y)\n"
        "[bad](docs/b.md) [bad](docs/a.md#nope)\n"
        "`[not a link](docs/c.md)`\n\n```\n[not a link](docs/d.md)\n```\n\n"
        "[ref]: docs/e.md\n\n# Top\n"
    )
    assert broken_links(page) == [
        "docs/b.md: no such file",
        "docs/a.md#nope: no such anchor",
        "docs/e.md: no such file",
    ]


def test_slug_is_githubs() -> None:
    assert slug("Running it: `paralleljob-operator`") == "running-it-paralleljob-operator"
    assert slug("In a cluster: kind") == "in-a-cluster-kind"
    assert slug("Where the next features go") == "where-the-next-features-go"
    assert anchors("# A\n## A\n") == {"a", "a-1"}


def test_every_make_target_is_in_the_readme() -> None:
    """The targets `make help` lists (a ``## `` comment) are the README's table's rows."""
    makefile = (REPO / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z-]+):.*## ", makefile, re.M))
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Make targets", 1)
    assert len(section) == 2, "README.md has no 'Make targets' section"
    table = section[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `make ([a-z-]+)` \|", table, re.M))
    assert documented == targets, (
        f"not in README: {sorted(targets - documented)}; "
        f"not in Makefile: {sorted(documented - targets)}"
    )


def _cluster_role_rules(kind: str = "ClusterRole", name: str = "paralleljob-operator") -> set[Rule]:
    """The operator's ClusterRole (or another role) in manifests/rbac.yaml, named as the
    docs table names it."""
    docs: list[Any] = list(yaml.safe_load_all((REPO / "manifests" / "rbac.yaml").read_text()))
    [role] = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    rules: set[Rule] = set()
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                name, _, sub = resource.partition("/")
                full = name if group == "" else f"{name}.{group}"
                if sub:
                    full += f"/{sub}"
                rules |= {(full, verb) for verb in rule["verbs"]}
    return rules


def test_permissions_table_is_the_cluster_role() -> None:
    """tests/deploy/test_rbac.py checks the table against the cluster; here, against the
    manifest, so that a change to one without the other fails without a cluster."""
    table = documented_rbac()
    assert table, f"{RBAC_PAGE.relative_to(REPO)}: empty permissions table"
    assert table == _cluster_role_rules()


def test_namespace_permissions_table_is_the_leader_election_role() -> None:
    """The Role in the operator's namespace (the Lease, the Fence) is the second table,
    exactly."""
    table = documented_rbac(marker=NAMESPACE_RBAC)
    assert {("leases.coordination.k8s.io", v) for v in ("get", "create", "update")} < table
    assert table == _cluster_role_rules("Role", "paralleljob-operator-leader-election")
