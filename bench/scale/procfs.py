"""A process's CPU-seconds and memory from /proc: utime + stime of every thread, VmRSS
(resident now) and VmHWM (the most it was ever resident, kept by the kernel, so no
sampling can miss the peak)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
MIB = 2**20


@dataclass(frozen=True)
class ProcSample:
    cpu_seconds: float
    rss_bytes: int
    hwm_bytes: int


def parse_stat_cpu(stat: str) -> float:
    """utime + stime of /proc/PID/stat, in seconds (fields counted after the command
    name's closing parenthesis: the name may hold spaces)."""
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def parse_status_kib(status: str, key: str) -> int:
    for line in status.splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1])
    return 0


def sample(pid: int) -> ProcSample | None:
    """None once the process is gone."""
    base = Path("/proc") / str(pid)
    try:
        stat = (base / "stat").read_text()
        status = (base / "status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return ProcSample(
        parse_stat_cpu(stat),
        parse_status_kib(status, "VmRSS") * 1024,
        parse_status_kib(status, "VmHWM") * 1024,
    )
