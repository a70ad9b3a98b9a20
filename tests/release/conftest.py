"""The releases an upgrade test installs: the previous one, built from the commit
hack/previous-release.env names, and this tree's, both by hack/release.sh, their images
loaded into the test cluster's node(s) from their archives, as a user without a
registry loads them."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.deploy.conftest import REPO, Kubectl, kubectl_binary


@dataclass(frozen=True)
class Release:
    version: str
    manifest: Path

    @property
    def archive(self) -> Path:
        return self.manifest.with_suffix(".image.tar")

    @property
    def image(self) -> str:
        found = re.search(
            r"^\s+image: (paralleljob-operator:\S+)$", self.manifest.read_text(), re.M
        )
        assert found, f"{self.manifest}: no operator image"
        return found.group(1)


def _release(*args: str) -> Release:
    proc = subprocess.run(
        [str(REPO / "hack" / "release.sh"), *args], capture_output=True, text=True, timeout=1200
    )
    assert proc.returncode == 0, f"hack/release.sh {' '.join(args)} failed:\n{proc.stderr}"
    manifest = Path(proc.stdout.strip().splitlines()[-1])
    version = manifest.name.removeprefix("paralleljob-operator-").removesuffix(".yaml")
    return Release(version, manifest)


def _load(kubectl: Kubectl, is_local_cluster: bool, release: Release) -> None:
    if is_local_cluster:
        command = [str(REPO / "hack" / "load-image.sh"), str(release.archive)]
    else:
        context = kubectl.run("config", "current-context").stdout.strip()
        if not context.startswith("kind-"):
            pytest.skip("upgrade tests need the local cluster or a kind cluster")
        name = context.removeprefix("kind-")
        command = ["kind", "load", "image-archive", str(release.archive), "--name", name]
    proc = subprocess.run(command, env=kubectl.env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{' '.join(command)} failed:\n{proc.stderr}"


@pytest.fixture(scope="package")
def kubectl(kubeconfig: str) -> Kubectl:
    return Kubectl(kubeconfig=kubeconfig, binary=kubectl_binary())


@pytest.fixture(scope="package")
def releases(kubectl: Kubectl, is_local_cluster: bool) -> Iterator[tuple[Release, Release]]:
    """(previous, current), their images on the node."""
    previous, current = _release("--previous"), _release()
    for release in (previous, current):
        _load(kubectl, is_local_cluster, release)
    yield previous, current


@pytest.fixture
def undeployed(kubectl: Kubectl) -> Iterator[None]:
    """No operator installed before the test nor after it (hack/undeploy.sh); CRDs that
    were installed before it are left installed, as this tree has them. After it, on a
    cluster deleted once the run ends (hack/kind-test.sh's), nothing is undone."""
    crds = kubectl.run("get", "crd", "paralleljobs.paralleljob.dev", check=False).returncode == 0
    _undeploy(kubectl, keep_crds=crds)
    yield
    if os.environ.get("PJ_TEST_CLUSTER_DISPOSABLE") == "1":
        return
    _undeploy(kubectl, keep_crds=crds)
    if crds:
        kubectl.run("apply", "--server-side", "--force-conflicts", "-k", str(REPO / "crds"))


def _undeploy(kubectl: Kubectl, *, keep_crds: bool) -> None:
    env = dict(kubectl.env, PJ_USER_KUBECONFIG=kubectl.kubeconfig)
    if keep_crds:
        env["PJ_UNDEPLOY_KEEP_CRD"] = "1"
    proc = subprocess.run(
        [str(REPO / "hack" / "undeploy.sh")], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, f"hack/undeploy.sh failed:\n{proc.stderr}"
