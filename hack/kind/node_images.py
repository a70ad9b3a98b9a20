#!/usr/bin/env python3
"""The images a kind node preloads, built without any registry.

Writes the Kubernetes release tarball layout `kind build node-image --type
file` reads (kind v0.33.0, pkg/build/nodeimage/internal/kube/
builder_tarball.go)::

    kubernetes/version                       v1.37.2
    kubernetes/server/bin/{kubeadm,kubelet,kubectl}
    kubernetes/server/bin/{kube-apiserver,kube-controller-manager,
                           kube-scheduler,kube-proxy}.tar

Each .tar is a docker archive (hack/images/build_image.py's one-layer format)
of the component's image, from the pinned binaries. kind loads those four
archives into the node's containerd and pulls every other image kubeadm and its
manifests name: etcd, CoreDNS, pause (the containerd sandbox image), kindnetd
and local-path-provisioner + helper. Nothing can be pulled here, so those
images are written into kube-apiserver.tar as well: a docker archive may hold
several images, and kind counts every image an archive's `repositories` entry
names as built (GetArchiveTags), so it imports them and pulls nothing.

Usage: node_images.py --cache-dir DIR --out FILE.tar.gz  (prints FILE.tar.gz)
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import re
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

HACK = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HACK / "images"))
import build_image as bi  # noqa: E402

PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"

# kind v0.33.0's images (pkg/build/nodeimage/const_cni.go, const_storage.go).
KINDNETD_IMAGE = "docker.io/kindest/kindnetd:v20260820-69b56db7"
PROVISIONER_IMAGE = "docker.io/kindest/local-path-provisioner:v20260820-69b56db7"
HELPER_IMAGE = "docker.io/kindest/local-path-helper:v20260131-7181c60a"


def versions() -> dict[str, str]:
    text = (HACK / "versions.env").read_text()
    return dict(re.findall(r"^([A-Z_]+)=(\S+)", text, re.M))


def base_layer() -> bi.Layer:
    """/etc basics, CA bundle: what distroless/static gives a Go binary."""
    layer = bi.Layer()
    bi.etc_files(layer, [("root", 0)])
    layer.add_file(CA_BUNDLE, Path(CA_BUNDLE).read_bytes())
    return layer


@dataclass
class Image:
    ref: str
    layer: bi.Layer
    config: dict[str, object]
    comment: str


def go_binary_image(ref: str, binary: Path, dest: str, comment: str, **config: object) -> Image:
    layer = base_layer()
    layer.add_file(dest, binary.read_bytes(), 0o755)
    return Image(ref, layer, {"Env": [PATH_ENV], **config}, comment)


# kube-proxy (iptables mode, kind's default) needs iptables. Upstream's image
# (distroless-iptables) carries both backends and iptables-wrapper, which picks
# the one the node's rules already use; kind's entrypoint does the same for
# the node. This does it on the first call, then execs the chosen backend.
IPTABLES_WRAPPER = """#!/bin/sh
# Picks iptables-legacy or iptables-nft by which has rules already (as
# kubernetes-sigs/iptables-wrappers and kind's entrypoint do), points the
# iptables commands at it, then runs the command it was called as.
set -e
rules() {
  { "xtables-$1-multi" iptables-save; "xtables-$1-multi" ip6tables-save; } 2>/dev/null \\
    | grep -c '^-' || true
}
legacy=$(rules legacy)
nft=$(rules nft)
mode=nft
[ "$legacy" -gt "$nft" ] && mode=legacy
for cmd in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
  ln -sf "xtables-$mode-multi" "/usr/sbin/$cmd"
done
exec "/usr/sbin/$(basename "$0")" "$@"
"""


IPTABLES_COMMANDS = [f"{ip}tables{op}" for ip in ("ip", "ip6") for op in ("", "-save", "-restore")]


def kube_proxy_image(ref: str, binary: Path) -> Image:
    layer = base_layer()
    bi.add_busybox(layer)  # sh and grep for the wrapper
    layer.add_file("/usr/local/bin/kube-proxy", binary.read_bytes(), 0o755)
    for tool in ("xtables-legacy-multi", "xtables-nft-multi", "conntrack"):
        layer.add_binary_with_libs(f"/usr/sbin/{tool}")
    xtables = Path("/usr/lib/x86_64-linux-gnu/xtables")
    for ext in sorted(xtables.glob("*.so")):
        layer.add_binary_with_libs(str(ext))
    layer.add_file("/usr/sbin/iptables-wrapper", IPTABLES_WRAPPER.encode(), 0o755)
    for cmd in IPTABLES_COMMANDS:
        layer.add_symlink(f"/usr/sbin/{cmd}", "iptables-wrapper")
    layer.add_dir("/run")
    layer.add_dir("/var/lib")
    comment = f"kube-proxy of k8s.io/kubernetes, Debian iptables {bi.deb_version('iptables')}"
    return Image(ref, layer, {"Env": [PATH_ENV]}, comment)


def helper_image() -> Image:
    """kind's local-path-helper: bash as sh, rm and mkdir, with their libraries
    (images/local-path-helper/Dockerfile stages exactly those)."""
    layer = bi.Layer()
    bi.etc_files(layer, [("root", 0)])
    for tool in ("/usr/bin/bash", "/usr/bin/rm", "/usr/bin/mkdir"):
        layer.add_binary_with_libs(tool)
    layer.add_symlink("/usr/bin/sh", "bash")
    layer.add_symlink("/bin", "usr/bin")
    comment = f"Debian bash {bi.deb_version('bash')}, coreutils {bi.deb_version('coreutils')}"
    return Image(HELPER_IMAGE, layer, {"Env": [PATH_ENV]}, comment)


KINDNETD_UNAVAILABLE = """#!/bin/sh
echo "kindnetd is not in this node image: its module, sigs.k8s.io/kind/images/kindnetd," >&2
echo "is not served by the Go module proxy, the only source of Go code here. Create" >&2
echo "the cluster with networking.disableDefaultCNI: true and a CNI config (hack/kind.sh up)." >&2
exit 1
"""


def kindnetd_unavailable() -> Image:
    """kind's node image build requires an image under kindnetd's name (it pulls
    it otherwise, and fails). Its source cannot be had here, so this image only
    says so and exits 1; hack/kind.sh disables kind's default CNI."""
    layer = bi.Layer()
    bi.etc_files(layer, [("root", 0)])
    bi.add_busybox(layer, with_applet_links=False)
    layer.add_file("/bin/kindnetd", KINDNETD_UNAVAILABLE.encode(), 0o755)
    config: dict[str, object] = {
        "Entrypoint": ["/bin/kindnetd"],
        "Env": [PATH_ENV],
        "Labels": {"org.opencontainers.image.description": "NOT kindnetd: placeholder, exits 1"},
    }
    comment = "placeholder: kindnetd's source is not reachable here"
    return Image(KINDNETD_IMAGE, layer, config, comment)


def write_archive(out: io.BytesIO, images: list[Image]) -> None:
    """A docker archive of several images; `repositories` first, which kind
    reads to know them all (manifest.json alone gives it the first image's)."""
    manifest = []
    repositories: dict[str, dict[str, str]] = {}
    members: list[tuple[str, bytes]] = []
    for img in images:
        layer_tar = img.layer.tar_bytes()
        diff_id = "sha256:" + hashlib.sha256(layer_tar).hexdigest()
        config_bytes = json.dumps(
            {
                "architecture": "amd64",
                "os": "linux",
                "created": "1970-01-01T00:00:00Z",
                "config": img.config,
                "rootfs": {"type": "layers", "diff_ids": [diff_id]},
                "history": [{"created": "1970-01-01T00:00:00Z", "created_by": img.comment}],
            },
            sort_keys=True,
            separators=(",", ":"),
        ).encode()
        config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
        layer_name = diff_id.removeprefix("sha256:") + "/layer.tar"
        repo, tag = img.ref.rsplit(":", 1)
        manifest.append({"Config": config_name, "RepoTags": [img.ref], "Layers": [layer_name]})
        repositories.setdefault(repo, {})[tag] = diff_id.removeprefix("sha256:")
        members += [(config_name, config_bytes), (layer_name, layer_tar)]
    members.insert(0, ("repositories", json.dumps(repositories).encode()))
    members.append(("manifest.json", json.dumps(manifest).encode()))
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))


def pause_binary(archive: Path) -> bytes:
    """/pause out of build_image.py's cached pause archive."""
    with tarfile.open(archive) as outer:
        manifest = outer.extractfile("manifest.json")
        assert manifest is not None
        layer_name = json.loads(manifest.read())[0]["Layers"][0]
        layer = outer.extractfile(layer_name)
        assert layer is not None
        with tarfile.open(fileobj=layer) as inner:
            pause = inner.extractfile("pause")
            assert pause is not None
            return pause.read()


def add_bytes(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    tar.addfile(info, io.BytesIO(data))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache-dir", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    v = versions()
    kube = v["KUBERNETES_VERSION"]
    cache = args.cache_dir
    kbin = cache / f"kubernetes-{kube}" / "bin"
    kubeadm = cache / f"kubeadm-{kube}" / "bin" / "kubeadm"
    etcd_tag = v["KIND_ETCD_VERSION"].removeprefix("v") + "-0"
    reg = "registry.k8s.io"

    archives: dict[str, list[Image]] = {}
    for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        comment = f"{name} of k8s.io/kubernetes {kube}"
        archives[name] = [
            go_binary_image(f"{reg}/{name}:{kube}", kbin / name, f"/usr/local/bin/{name}", comment)
        ]
    archives["kube-proxy"] = [kube_proxy_image(f"{reg}/kube-proxy:{kube}", kbin / "kube-proxy")]
    pause_ref, pause_tar = bi.build_pause(cache / "images")
    pause_layer = bi.Layer()
    pause_layer.add_file("/pause", pause_binary(pause_tar), 0o755)
    lpp = v["LOCAL_PATH_PROVISIONER_VERSION"]
    archives["kube-apiserver"] += [
        go_binary_image(
            f"{reg}/etcd:{etcd_tag}",
            cache / f"etcd-{v['KIND_ETCD_VERSION']}" / "bin" / "etcd",
            "/usr/local/bin/etcd",
            f"go.etcd.io/etcd/server/v3 {v['KIND_ETCD_VERSION']}",
        ),
        go_binary_image(
            f"{reg}/coredns/coredns:{v['KIND_COREDNS_VERSION']}",
            cache / f"coredns-{v['KIND_COREDNS_VERSION']}" / "bin" / "coredns",
            "/coredns",
            f"github.com/coredns/coredns {v['KIND_COREDNS_VERSION']}",
            Entrypoint=["/coredns"],
            ExposedPorts={"53/tcp": {}, "53/udp": {}},
        ),
        Image(
            pause_ref,
            pause_layer,
            {"Entrypoint": ["/pause"], "User": "65535:65535"},
            "pause.c of k8s.io/kubernetes",
        ),
        go_binary_image(
            PROVISIONER_IMAGE,
            cache / f"local-path-provisioner-{lpp}" / "bin" / "local-path-provisioner",
            "/usr/local/bin/local-path-provisioner",
            f"github.com/rancher/local-path-provisioner {lpp}",
            Entrypoint=["/usr/local/bin/local-path-provisioner"],
        ),
        helper_image(),
        kindnetd_unavailable(),
    ]

    args.out.parent.mkdir(parents=True, exist_ok=True)
    bindir = "kubernetes/server/bin"
    with (
        tempfile.NamedTemporaryFile(dir=args.out.parent, delete=False) as tmp,
        gzip.GzipFile(fileobj=tmp, mode="wb", compresslevel=1, mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w") as tar,
    ):
        add_bytes(tar, "kubernetes/version", (kube + "\n").encode())
        for binary in (kubeadm, kbin / "kubelet", kbin / "kubectl"):
            add_bytes(tar, f"{bindir}/{binary.name}", binary.read_bytes(), 0o755)
        for name, images in archives.items():
            buf = io.BytesIO()
            write_archive(buf, images)
            add_bytes(tar, f"{bindir}/{name}.tar", buf.getvalue())
    os.replace(tmp.name, args.out)
    print(args.out)


if __name__ == "__main__":
    main()
