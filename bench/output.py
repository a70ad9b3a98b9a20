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
    ran = {r.scenario for rs in rounds.values() for r in rs}
    # Only the plots of what ran: a part that skipped a scenario gets no empty plot.
    drawn = [
        ("s1-pods", "s1" in ran, plots.pods_over_time),
        ("s3-latency", "s3" in ran, plots.latency_cdfs),
        ("s8-rss", plots.has_curve(rounds), plots.curve_rss),
        ("s8-reaction", plots.has_curve(rounds), plots.curve_reaction),
    ]
    images = []
    for name, wanted, draw in drawn:
        if wanted:
            images.append(f"{stem}-{name}.png")
            draw(rounds, out / images[-1])
    text = report.markdown(meta, rounds, summaries, sizes, images)
    (out / f"{stem}.md").write_text(text)
    data = report.to_json(meta, rounds, summaries)
    (out / f"{stem}.json").write_text(json.dumps(data, indent=1) + "\n")
    if show:
        print(text)
        print(f"bench: results in {out / stem}.md (.json, plots beside it)", file=sys.stderr)
