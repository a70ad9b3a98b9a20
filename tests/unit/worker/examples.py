"""The work-queue examples as ``kubectl apply -k`` applies them: rendered with ``kubectl
kustomize`` (the test is skipped without kubectl), and one object of a kind picked out."""

from __future__ import annotations

import copy
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml


def render(path: Path) -> list[dict[str, Any]]:
    if shutil.which("kubectl") is None:
        pytest.skip("no kubectl to render the kustomization with")
    out = subprocess.run(
        ["kubectl", "kustomize", str(path)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    """The one object of ``kind``, a copy the test may change."""
    [found] = [d for d in docs if d["kind"] == kind]
    return copy.deepcopy(found)
