"""`hack/deploy.sh kind` without docker, kind or kubectl names what is missing and the make
target that provides it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from .conftest import REPO

DEPLOY = str(REPO / "hack" / "deploy.sh")


def _run_with_tools(tmp_path: Path, tools: list[str]) -> subprocess.CompletedProcess[str]:
    """hack/deploy.sh kind with a PATH holding only the shell, coreutils it uses and `tools`."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name in ("bash", "dirname", "cat", "sed", "grep", "date"):
        found = shutil.which(name)
        assert found, name
        (bindir / name).symlink_to(found)
    for name in tools:  # present, but never got as far as being run
        stub = bindir / name
        stub.write_text("#!/bin/sh\nexit 1\n")
        stub.chmod(0o755)
    env = {
        "PATH": str(bindir),
        "HOME": str(tmp_path),
        "PJ_CACHE_DIR": str(tmp_path / "cache"),  # no pinned kubectl either
        # A user's machine, which reaches a registry: kind's own node image, the user's tools
        # (not the kind this project builds when no registry answers, hack/kube-target.sh).
        "PJ_KIND_HERE": "0",
    }
    return subprocess.run(
        [shutil.which("bash") or "bash", DEPLOY, "kind"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )


def test_names_every_missing_tool_and_how_to_install_it(tmp_path: Path) -> None:
    result = _run_with_tools(tmp_path, [])
    assert result.returncode != 0
    err = result.stderr
    assert "'docker' is missing: run 'make prereqs'" in err, err
    assert "'kind' is missing: run 'make build'" in err, err
    assert "'kubectl' is missing: run 'make build'" in err, err


def test_names_only_what_is_missing(tmp_path: Path) -> None:
    result = _run_with_tools(tmp_path, ["docker", "kubectl"])
    assert result.returncode != 0
    assert "'kind' is missing" in result.stderr, result.stderr
    assert "'docker' is missing" not in result.stderr
    assert "'kubectl' is missing" not in result.stderr


def test_the_makefile_target_runs_it(tmp_path: Path) -> None:
    assert "hack/deploy.sh kind" in (REPO / "Makefile").read_text()
    assert os.access(DEPLOY, os.X_OK)
