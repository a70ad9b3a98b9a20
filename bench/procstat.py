"""CPU-seconds and memory of processes, read from /proc: utime + stime of every thread,
VmRSS (resident now) and VmHWM (the most it was ever resident, kept by the kernel, so no
sampling can miss the peak).

Every component of the local cluster runs on this host: the control plane by the pid
files in .cluster/pids, the operator as a container of the real node, found by its
container ID in /proc/PID/cgroup (which works for cgroup v1 and v2 alike). The scale
harness's operator is its own subprocess.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PROC = Path("/proc")
MIB = 2**20


@dataclass(frozen=True)
class Usage:
    cpu_seconds: float
    rss_bytes: int
    hwm_bytes: int = 0


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


def sample(pid: int) -> Usage | None:
    """One process's CPU, RSS and VmHWM; None once it is gone."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
        status = (PROC / str(pid) / "status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return Usage(
        parse_stat_cpu(stat),
        parse_status_kib(status, "VmRSS") * 1024,
        parse_status_kib(status, "VmHWM") * 1024,
    )


def read_usage(pids: list[int]) -> Usage:
    """CPU and RSS summed over ``pids`` (those that have exited count 0)."""
    found = [u for u in map(sample, pids) if u is not None]
    return Usage(sum(u.cpu_seconds for u in found), sum(u.rss_bytes for u in found))


def pid_file_pids(pid_file: Path) -> list[int]:
    """The pid recorded by hack/cluster-up.sh (``PID BINARY``), if that process lives."""
    try:
        pid = int(pid_file.read_text().split()[0])
    except (FileNotFoundError, IndexError, ValueError):
        return []
    return [pid] if alive(pid) else []


def alive(pid: int) -> bool:
    return (PROC / str(pid)).exists()


def container_pids(container_id: str) -> list[int]:
    """The processes whose cgroup path names this container (containerd's 64-hex ID)."""
    return [pid for pid, cgroup in _cgroups() if container_id in cgroup]


def _cgroups() -> Iterator[tuple[int, str]]:
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            yield int(entry.name), (entry / "cgroup").read_text()
        except OSError:
            continue


@dataclass
class Track:
    """One process group's usage over a round: CPU at start and end, peak RSS sampled."""

    find: Callable[[], list[int]]
    pids: list[int]
    start_cpu: float = 0.0
    cpu_seconds: float = 0.0
    peak_rss_bytes: int = 0
    #: The processes were replaced during the round (a restart): CPU is not comparable.
    replaced: bool = False

    def sample(self) -> Usage:
        if not all((PROC / str(p)).exists() for p in self.pids):
            self.pids = self.find()
            self.replaced = True
        usage = read_usage(self.pids)
        self.peak_rss_bytes = max(self.peak_rss_bytes, usage.rss_bytes)
        return usage


class Sampler:
    """``async with Sampler(finders) as s:`` CPU-seconds and peak RSS of each process
    group (found by its finder) over the block, RSS sampled every half second."""

    INTERVAL = 0.5

    def __init__(self, finders: dict[str, Callable[[], list[int]]]) -> None:
        self.tracks = {name: Track(find, find()) for name, find in finders.items()}
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Sampler:
        for track in self.tracks.values():
            track.start_cpu = track.sample().cpu_seconds
        self._task = asyncio.create_task(self._loop())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        for track in self.tracks.values():
            track.cpu_seconds = track.sample().cpu_seconds - track.start_cpu

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.INTERVAL)
            for track in self.tracks.values():
                track.sample()

    def summary(self) -> dict[str, dict[str, float]]:
        """Per process group: CPU-seconds used and peak RSS (MiB); a group whose
        processes were replaced during the round is left out (its figures would mix
        two processes)."""
        return {
            name: {
                "cpu_seconds": round(t.cpu_seconds, 2),
                "peak_rss_mb": round(t.peak_rss_bytes / 2**20, 1),
            }
            for name, t in self.tracks.items()
            if t.pids and not t.replaced
        }
