"""Bytes per object by structure, from what traced.py wrote: the memory the operator's
allocations grew by between the baseline (before it listed anything) and the steady
state, by source line and by package, divided by the objects it holds. Pure."""

from __future__ import annotations

from typing import Any

#: Package entries listed (the top lines are all of traced.py's, 30).
TOP_PACKAGES = 12


def short_path(filename: str) -> str:
    """A source file named from its package down: kopf/_core/.../x.py, json/decoder.py."""
    path = filename.replace("\\", "/")
    for marker in ("/site-packages/", "/operator/"):
        if marker in path:
            return path.split(marker, 1)[1]
    parts = path.split("/")
    return "/".join(parts[-2:]) if len(parts) > 1 else path


def summarize(dump: dict[str, Any], objects: int) -> dict[str, Any]:
    """The grown memory in bytes per object: total, top lines, top packages."""
    per = max(objects, 1)
    top = [
        {
            "where": f"{short_path(e['file'])}:{e['line']}",
            "package": e["package"],
            "source": e["source"],
            "bytes": e["size"],
            "blocks": e["count"],
            "bytes_per_object": round(e["size"] / per, 1),
        }
        for e in dump.get("top", [])
    ]
    packages = sorted(dump.get("packages", {}).items(), key=lambda kv: kv[1]["size"], reverse=True)
    return {
        "objects": objects,
        "grown_bytes": dump.get("grown_bytes", 0),
        "grown_blocks": dump.get("grown_blocks", 0),
        "bytes_per_object": round(dump.get("grown_bytes", 0) / per, 1),
        "traced_bytes": dump.get("traced_bytes", 0),
        "traced_peak_bytes": dump.get("traced_peak_bytes", 0),
        "snapshot_seconds": dump.get("snapshot_seconds"),
        "top": top,
        "packages": [
            {
                "package": name,
                "bytes": v["size"],
                "blocks": v["count"],
                "bytes_per_object": round(v["size"] / per, 1),
            }
            for name, v in packages[:TOP_PACKAGES]
        ],
    }
