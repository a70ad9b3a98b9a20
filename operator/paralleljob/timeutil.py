"""RFC 3339 timestamps as the API server writes them (metav1.Time: whole seconds, UTC)."""

from __future__ import annotations

from datetime import UTC, datetime


def parse_time(value: object) -> datetime | None:
    """Parses an API timestamp; ``None`` for anything absent or unparsable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def format_time(value: datetime) -> str:
    """Formats like metav1.Time: ``2006-01-02T15:04:05Z`` (sub-second part dropped)."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def truncate(value: datetime) -> datetime:
    """Drops the sub-second part, as a round trip through metav1.Time would."""
    return value.replace(microsecond=0)
