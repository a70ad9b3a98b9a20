"""A run's files: the markdown report, its JSON and the plots beside them, named by a stem
(``<date>[-quick][-<part>]``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from . import plots, report
from .runner import Round
from .scenarios import Sizes


def write(
    out: Path,
    stem: str,
    meta: dict[str, Any],
    rounds: dict[str, list[Round]],
    sizes: Sizes,
    *,
    show: bool = True,
) -> None:
    """Writes ``<stem>.md``, ``<stem>.json`` and the plots; ``show`` prints the report too."""
    out.mkdir(parents=True, exist_ok=True)
    summaries = {setting: report.summarize(rs) for setting, rs in rounds.items()}
    images = []
    if _ran(rounds, "s1"):
        images.append(f"{stem}-s1-pods.png")
        plots.pods_over_time(rounds, out / images[-1])
    if _ran(rounds, "s3"):
        images.append(f"{stem}-s3-latency.png")
        plots.latency_cdfs(rounds, out / images[-1])
    if plots.has_curve(rounds):
        rss_png, reaction_png = f"{stem}-s8-rss.png", f"{stem}-s8-reaction.png"
        plots.curve_rss(rounds, out / rss_png)
        plots.curve_reaction(rounds, out / reaction_png)
        images += [rss_png, reaction_png]
    text = report.markdown(meta, rounds, summaries, sizes, images)
    (out / f"{stem}.md").write_text(text)
    data = report.to_json(meta, rounds, summaries)
    (out / f"{stem}.json").write_text(json.dumps(data, indent=1) + "\n")
    if show:
        print(text)
        print(f"bench: results in {out / stem}.md (.json, plots beside it)", file=sys.stderr)


def _ran(rounds: dict[str, list[Round]], scenario: str) -> bool:
    """Whether the run has rounds of ``scenario``: a part that skipped it gets no empty plot."""
    return any(r.scenario == scenario for rs in rounds.values() for r in rs)
