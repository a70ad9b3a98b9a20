"""The documentation as tests read it: the tables that tests check against the code and the
cluster live in ``docs/`` pages, parsed here (pure: no cluster)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: The page with the operator's permissions tables ("Permissions", between rbac markers).
RBAC_PAGE = REPO / "docs" / "deploy.md"
#: The marker of the table of what the operator may do in its own namespace only.
NAMESPACE_RBAC = "rbac: namespace"

Rule = tuple[str, str]  # ("pods" | "paralleljobs.paralleljob.dev/status", verb)


def documented_rbac(page: Path = RBAC_PAGE, marker: str = "rbac") -> set[Rule]:
    """The table between <!-- rbac --> markers in the deploy page's "Permissions": what
    the ClusterRole grants everywhere; with ``marker="rbac: namespace"``, the table of what
    the Role grants in the operator's own namespace only."""
    text = page.read_text()
    table = re.search(
        rf"<!-- {re.escape(marker)} -->(.*?)<!-- /{re.escape(marker)} -->", text, re.S
    )
    assert table, f"{page.relative_to(REPO)} has no <!-- {marker} --> table"
    rules: set[Rule] = set()
    for line in table.group(1).splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("API group", "---"):
            continue
        group, resource, verbs = cells
        name, _, sub = resource.partition("/")
        full = name if group == "core" else f"{name}.{group}"
        if sub:
            full += f"/{sub}"
        rules |= {(full, v.strip()) for v in verbs.split(",")}
    return rules
