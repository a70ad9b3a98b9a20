"""One version, set in one place (VERSION): the package's metadata, --version, the
paralleljob_build_info metric and the start-up log say it alike."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from paralleljob.cli import parse_args
from paralleljob.runtime import metrics
from paralleljob.version import version

REPO = Path(__file__).resolve().parents[2]
VERSION = (REPO / "VERSION").read_text().strip()


def test_the_version_file_is_a_semantic_version_and_the_packages() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+(-[0-9A-Za-z.]+)?", VERSION), VERSION
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in project["project"]
    assert project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"file": "VERSION"}
    assert version() == VERSION, "reinstall the package (make venv) after editing VERSION"


def test_version_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        parse_args(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"paralleljob-operator {VERSION}"


def test_build_info_metric() -> None:
    assert metrics.BUILD_INFO is not None
    assert REGISTRY.get_sample_value("paralleljob_build_info", {"version": VERSION}) == 1.0


def test_the_changelog_names_this_version() -> None:
    changelog = (REPO / "CHANGELOG.md").read_text()
    assert re.search(rf"^## {re.escape(VERSION)}\b", changelog, re.M), "CHANGELOG.md"


def test_the_image_is_built_with_the_version_file() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "COPY VERSION ./" in dockerfile
    assert "!VERSION" in (REPO / ".dockerignore").read_text().splitlines()
