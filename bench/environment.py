"""The bench's two operator settings, deploying the operator with one, and what a result
file records about where it ran (versions, machine, commit)."""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .kube import Kube
from .runner import REPO_ROOT, SYSTEM_NAMESPACE

# kube-controller-manager's client defaults (--kube-api-qps / --kube-api-burst), which
# its job controller runs with: the "equal API budget" gives the operator the same.
KCM_QPS = "20"
KCM_BURST = "30"


@dataclass(frozen=True)
class Setting:
    name: str
    description: str
    #: Operator configuration (manifests/config.env keys) for hack/deploy.sh.
    config: dict[str, str]


EQUAL = Setting(
    "equal",
    f"equal API budget: operator limited to the controller manager's client QPS {KCM_QPS} / "
    f"burst {KCM_BURST}",
    {"PJ_API_QPS": KCM_QPS, "PJ_API_BURST": KCM_BURST},
)
DEFAULTS = Setting("defaults", "defaults: each controller as shipped", {})
SETTINGS = {s.name: s for s in (EQUAL, DEFAULTS)}


def config_env(path: Path = REPO_ROOT / "manifests" / "config.env") -> dict[str, str]:
    """The KEY=VALUE lines of the operator's ConfigMap source: its settings as deployed."""
    env = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            key, value = line.split("=", 1)
            env[key.strip()] = value.strip()
    return env


def deploy_operator(setting: Setting, image: str | None) -> None:
    """hack/deploy.sh local with exactly this setting's configuration: every other
    operator variable unset (so config.env's values apply, whatever this shell has
    exported), all namespaces watched; ``image`` skips the rebuild."""
    unset = config_env().keys() | EQUAL.config.keys()
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.update(setting.config, PJ_WATCH_NAMESPACES="")
    if image:
        env["PJ_IMAGE"] = image
    subprocess.run(
        [str(REPO_ROOT / "hack" / "deploy.sh"), "local"],
        env=env,
        stdout=sys.stderr,
        check=True,
        timeout=1800,
    )


async def operator_deployment(kube: Kube) -> dict[str, Any]:
    """The deployed operator's image and the configuration it runs with (its ConfigMap).

    Raises OverriddenConfig when the container's own env overrides a ConfigMap key (a
    ``kubectl set env`` left behind: server-side apply keeps another manager's fields),
    since the operator would then not run with the setting the results name."""
    deployment = await kube.get(
        f"/apis/apps/v1/namespaces/{SYSTEM_NAMESPACE}/deployments/paralleljob-operator"
    )
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    config: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        name = (source.get("configMapRef") or {}).get("name")
        if name:
            cm = await kube.get(f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/configmaps/{name}")
            config.update(cm.get("data") or {})
    overridden = {
        e["name"]: e.get("value") for e in container.get("env") or [] if e["name"] in config
    }
    if overridden:
        shown = " ".join(f"{k}={v}" for k, v in sorted(overridden.items()))
        unset = " ".join(f"{k}-" for k in sorted(overridden))
        raise OverriddenConfig(
            f"the operator's Deployment sets {shown} in its env, over its ConfigMap: remove it "
            f"(kubectl -n {SYSTEM_NAMESPACE} set env deploy/paralleljob-operator {unset})"
        )
    return {"image": container["image"], "config": config}


class OverriddenConfig(RuntimeError):
    """The deployed operator does not run with its ConfigMap's configuration."""


def versions() -> dict[str, str]:
    text = (REPO_ROOT / "hack" / "versions.env").read_text()
    pins = dict(re.findall(r"^([A-Z_]+)=(\S+)", text, re.M))
    pins["PYTHON"] = platform.python_version()
    return pins


def machine() -> dict[str, str]:
    cpuinfo = Path("/proc/cpuinfo").read_text()
    model = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
    meminfo = Path("/proc/meminfo").read_text()
    mem = re.search(r"^MemTotal:\s*(\d+) kB", meminfo, re.M)
    return {
        "cpus": str(os.cpu_count()),
        "cpu_model": model.group(1).strip() if model else "unknown",
        "memory_gib": f"{int(mem.group(1)) / 2**20:.1f}" if mem else "unknown",
        "kernel": platform.release(),
    }


def git_commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()

    commit = git("rev-parse", "--short=12", "HEAD")
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "operator", "manifests")
    return f"{commit}{' (operator/ or manifests/ modified)' if dirty else ''}"
