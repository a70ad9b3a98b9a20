"""An Event a sync decides to record: its type (constants.NORMAL or WARNING), reason
(constants.REASON_*) and message. The one value type for every kind's Events (the
shell records them through its Recorder)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Event:
    type: str
    reason: str
    message: str
