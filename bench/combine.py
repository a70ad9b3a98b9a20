"""``python -m bench.combine``: one report from partial runs' JSON files (``--part``).

Scenario 8's built-in arm takes over an hour on its own, so its arms can run as separate
parts on the same cluster setup; this merges their rounds, setting by setting, into one
report with both arms in its tables, targets and plots."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from . import output
from .runner import REPO_ROOT, Round
from .scenarios import Sizes


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.combine", description=__doc__)
    add = parser.add_argument
    add("parts", nargs="+", type=Path, help="the parts' JSON results files")
    add("--stem", required=True, help="the combined files' name (<stem>.md)")
    add("--note", default="", help="a line for the combined header")
    add(
        "--latest",
        action="store_true",
        help="a scenario's rounds of one arm from the last part that has any (a rerun "
        "supersedes an earlier part's rounds), not from every part",
    )
    add("--out", type=Path, default=REPO_ROOT / "bench" / "results", help="results directory")
    return parser.parse_args(argv)


def sizes_of(metas: Sequence[dict[str, Any]]) -> Sizes:
    """The first part's sizes, with scenario 8's levels of every part."""
    known = {f.name for f in fields(Sizes)}
    first = {k: v for k, v in metas[0]["sizes"].items() if k in known}
    levels = sorted({level for m in metas for level in m["sizes"]["curve_levels"]})
    return Sizes(**{**first, "curve_levels": tuple(levels)})


def merged_meta(
    metas: Sequence[dict[str, Any]], names: Sequence[str], note: str = ""
) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    for m in metas:
        for name, info in m["settings"].items():
            settings.setdefault(name, info)
    commits = list(dict.fromkeys(m["commit"] for m in metas))
    return {
        **metas[0],
        "note": "; ".join(
            [
                f"combined from {', '.join(names)}",
                *(m["note"] for m in metas if m["note"]),
                *([note] if note else []),
            ]
        ),
        "commit": ", ".join(commits),
        "settings": settings,
        "duration_min": sum(m["duration_min"] for m in metas),
    }


def merged_rounds(
    parts: Sequence[dict[str, Any]], *, latest: bool = False
) -> dict[str, list[Round]]:
    """Every part's rounds, setting by setting (``latest``: of a scenario and arm, only the
    last part's that has any)."""
    rounds: dict[str, list[Round]] = {}
    for part in parts:
        for setting, rs in part["rounds"].items():
            new = [Round.from_json(r) for r in rs]
            if latest:
                rerun = {(r.scenario, r.arm) for r in new}
                kept = [r for r in rounds.get(setting, []) if (r.scenario, r.arm) not in rerun]
                rounds[setting] = kept
            rounds.setdefault(setting, []).extend(new)
    return rounds


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    parts = [json.loads(p.read_text()) for p in args.parts]
    metas = [p["meta"] for p in parts]
    sizes = sizes_of(metas)
    meta = {**merged_meta(metas, [p.name for p in args.parts], args.note), "sizes": vars(sizes)}
    output.write(args.out, args.stem, meta, merged_rounds(parts, latest=args.latest), sizes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
