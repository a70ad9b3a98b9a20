"""A resourceVersion compared as a number."""

from __future__ import annotations


def version_number(resource_version: str) -> int | None:
    """A resourceVersion as the number it is on every API server backed by etcd (the
    1.35 apimachinery's CompareResourceVersion reads it so); None for anything else, with
    which the caller fails open, as upstream's consistency checks do."""
    try:
        number = int(resource_version)
    except ValueError:
        return None
    return number if number > 0 else None
