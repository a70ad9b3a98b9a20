#!/usr/bin/env python3
"""Builds the local cluster's preloaded images without any registry.

Each image is one layer assembled from files of installed Debian packages (or,
for pause, a binary compiled from the pinned Kubernetes module's own
build/pause/linux/pause.c; for kueue and agnhost, on request, the Go binaries
``hack/build.sh kueue`` built) and written as a docker-archive tarball, a format
that both ``ctr images import`` and ``docker load`` accept. Only the Python
standard library is used, so this runs before any virtualenv exists.

Tarballs are cached under ``<cache>/images/`` keyed by image tag, the Debian
package version and a hash of this script, so they are rebuilt only when one of
those changes. Usage::

    build_image.py --cache-dir DIR [busybox|redis|pause|kueue|agnhost ...]

prints one line ``<image-ref> <tarball>`` per image.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

# The tags other engineers' manifests use. They must equal the upstream
# version of the Debian package the image is built from; if Debian moves on,
# the build fails loudly instead of shipping a lying tag.
BUSYBOX_TAG = "1.35.0"
REDIS_TAG = "7.0.15"
KUBERNETES_MODULE = "k8s.io/kubernetes"

SCRIPT_HASH = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]


@dataclass
class Layer:
    """Files of a single image layer, keyed by their absolute path in the image."""

    files: dict[str, tuple[bytes, int]] = field(default_factory=dict)  # path -> (data, mode)
    symlinks: dict[str, str] = field(default_factory=dict)  # path -> target
    dirs: dict[str, int] = field(default_factory=dict)  # path -> mode

    def add_dir(self, path: str, mode: int = 0o755) -> None:
        parts = Path(path).parts[1:]
        for i in range(1, len(parts) + 1):
            sub = "/" + "/".join(parts[:i])
            if sub not in self.symlinks:
                self.dirs.setdefault(sub, mode if i == len(parts) else 0o755)

    def add_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        self.add_dir(str(Path(path).parent))
        self.files[path] = (data, mode)

    def add_symlink(self, path: str, target: str) -> None:
        self.add_dir(str(Path(path).parent))
        self.symlinks[path] = target

    def add_host_path(self, host_path: str) -> None:
        """Copies a host file, reproducing every symlink met on the way.

        Debian bookworm is merged-/usr (/lib -> usr/lib) and library names are
        symlink chains; replaying them keeps paths the dynamic loader and
        ldd agree on.
        """
        current = "/"
        parts = Path(host_path).parts[1:]
        for i, part in enumerate(parts):
            candidate = os.path.join(current, part)
            if os.path.islink(candidate):
                target = os.readlink(candidate)
                self.add_symlink(candidate, target)
                resolved = os.path.normpath(os.path.join(current, target))
                rest = parts[i + 1 :]
                self.add_host_path(os.path.join(resolved, *rest) if rest else resolved)
                return
            current = candidate
        st = os.stat(current)
        self.add_file(current, Path(current).read_bytes(), st.st_mode & 0o7777)

    def add_binary_with_libs(self, binary: str) -> None:
        """Adds an ELF binary and every shared library ldd says it loads."""
        self.add_host_path(binary)
        out = subprocess.run(["ldd", binary], check=True, capture_output=True, text=True).stdout
        for line in out.splitlines():
            match = re.search(r"(/\S+) \(0x", line)
            if match:
                self.add_host_path(match.group(1))

    def tar_bytes(self) -> bytes:
        """A deterministic tar: sorted entries, root-owned, mtime 0."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
            entries = sorted(
                [(p, "d") for p in self.dirs]
                + [(p, "f") for p in self.files]
                + [(p, "l") for p in self.symlinks]
            )
            for path, kind in entries:
                info = tarfile.TarInfo(path.lstrip("/"))
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                info.mtime = 0
                if kind == "d":
                    info.type = tarfile.DIRTYPE
                    info.mode = self.dirs[path]
                    tar.addfile(info)
                elif kind == "l":
                    info.type = tarfile.SYMTYPE
                    info.linkname = self.symlinks[path]
                    info.mode = 0o777
                    tar.addfile(info)
                else:
                    data, mode = self.files[path]
                    info.size = len(data)
                    info.mode = mode
                    tar.addfile(info, io.BytesIO(data))
        return buf.getvalue()


def write_docker_archive(
    out: Path, repo_tag: str, layer: Layer, config: dict[str, object], comment: str
) -> None:
    """Writes a `docker save`-style tarball (manifest.json + config + one layer)."""
    layer_tar = layer.tar_bytes()
    diff_id = "sha256:" + hashlib.sha256(layer_tar).hexdigest()
    image_config = {
        "architecture": "amd64",
        "os": "linux",
        "created": "1970-01-01T00:00:00Z",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": "1970-01-01T00:00:00Z", "created_by": comment}],
    }
    config_bytes = json.dumps(image_config, sort_keys=True, separators=(",", ":")).encode()
    config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
    layer_name = diff_id.removeprefix("sha256:") + "/layer.tar"
    repo, tag = repo_tag.rsplit(":", 1)
    manifest = [{"Config": config_name, "RepoTags": [repo_tag], "Layers": [layer_name]}]
    members: list[tuple[str, bytes]] = [
        (config_name, config_bytes),
        (layer_name, layer_tar),
        ("manifest.json", json.dumps(manifest).encode()),
        ("repositories", json.dumps({repo: {tag: diff_id.removeprefix("sha256:")}}).encode()),
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    with tarfile.open(tmp, mode="w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    tmp.replace(out)


def deb_version(package: str) -> str:
    """The installed version of a Debian package, or a clear error naming it."""
    result = subprocess.run(
        ["dpkg-query", "-W", "-f=${Status} ${Version}", package], capture_output=True, text=True
    )
    if result.returncode != 0 or not result.stdout.startswith("install ok installed"):
        sys.exit(f"error: Debian package {package} is not installed (run hack/install-prereqs.sh)")
    return result.stdout.split()[-1]


def upstream_version(deb: str) -> str:
    """'5:7.0.15-1~deb12u10' -> '7.0.15'."""
    return deb.split(":", 1)[-1].rsplit("-", 1)[0]


def check_tag(image: str, tag: str, deb: str) -> None:
    if upstream_version(deb) != tag:
        sys.exit(
            f"error: {image}:{tag} would be built from Debian version {deb}; "
            f"update the tag in {__file__} and every manifest using it"
        )


def debian_built(cache: Path, image: str, tag: str, package: str) -> tuple[str, str, Path]:
    """The Debian version an image is built from (checked against its tag), the
    image's Docker Hub reference and its archive's path in the cache."""
    deb = deb_version(package)
    check_tag(image, tag, deb)
    ref = f"docker.io/library/{image}:{tag}"
    return deb, ref, cache / f"{image}-{tag}-deb{deb.replace(':', '_')}-{SCRIPT_HASH}.tar"


def etc_files(layer: Layer, users: list[tuple[str, int]]) -> None:
    """Minimal /etc and the usual empty directories of a base image."""
    passwd = "".join(
        f"{name}:x:{uid}:{uid}:{name}:{'/root' if uid == 0 else '/home/' + name}:/bin/sh\n"
        for name, uid in users
    )
    passwd += "nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
    group = "".join(f"{name}:x:{uid}:\n" for name, uid in users) + "nogroup:x:65534:\n"
    layer.add_file("/etc/passwd", passwd.encode())
    layer.add_file("/etc/group", group.encode())
    layer.add_file("/etc/nsswitch.conf", b"hosts: files dns\npasswd: files\ngroup: files\n")
    for d in ("/root", "/home", "/var", "/proc", "/sys", "/dev", "/etc"):
        layer.add_dir(d, 0o700 if d == "/root" else 0o755)
    layer.add_dir("/tmp", 0o1777)


def add_busybox(layer: Layer, with_applet_links: bool = True) -> None:
    """Debian's static busybox plus a symlink per applet, as in busybox images."""
    # A plain /bin directory, as in Docker Hub's busybox image, rather than the
    # host's merged-/usr symlink /bin -> usr/bin.
    layer.add_file("/bin/busybox", Path(os.path.realpath("/bin/busybox")).read_bytes(), 0o755)
    if not with_applet_links:
        layer.add_symlink("/bin/sh", "busybox")
        return
    applets = subprocess.run(
        ["/bin/busybox", "--list-full"], check=True, capture_output=True, text=True
    ).stdout.split()
    for applet in applets:
        path = "/" + applet
        if path != "/bin/busybox":
            layer.add_symlink(path, os.path.relpath("/bin/busybox", os.path.dirname(path)))


def build_busybox(cache: Path) -> tuple[str, Path]:
    deb, ref, out = debian_built(cache, "busybox", BUSYBOX_TAG, "busybox-static")
    if not out.exists():
        layer = Layer()
        etc_files(layer, [("root", 0)])
        add_busybox(layer)
        config: dict[str, object] = {
            "Cmd": ["sh"],
            "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
        }
        write_docker_archive(out, ref, layer, config, f"Debian busybox-static {deb}")
    return ref, out


# Docker Hub's redis image turns protected mode off when started without a
# config file, so that other pods can connect; do the same so manifests behave
# alike here and on kind.
REDIS_ENTRYPOINT = """#!/bin/sh
set -e
if [ "${1#-}" != "$1" ] || [ "${1%.conf}" != "$1" ]; then
  set -- redis-server "$@"
fi
if [ "$1" = "redis-server" ]; then
  config_given=
  case "${2:-}" in *.conf) config_given=1 ;; esac
  if [ -z "$config_given" ]; then
    set -- "$@" --protected-mode no
  fi
fi
exec "$@"
"""


def build_redis(cache: Path) -> tuple[str, Path]:
    deb, ref, out = debian_built(cache, "redis", REDIS_TAG, "redis-server")
    if not out.exists():
        layer = Layer()
        etc_files(layer, [("root", 0), ("redis", 999)])
        add_busybox(layer)  # a shell for the entrypoint and for kubectl exec
        for binary in ("/usr/bin/redis-server", "/usr/bin/redis-cli"):
            layer.add_binary_with_libs(binary)
        layer.add_file("/usr/local/bin/docker-entrypoint.sh", REDIS_ENTRYPOINT.encode(), 0o755)
        layer.add_dir("/data", 0o777)
        config: dict[str, object] = {
            "Entrypoint": ["docker-entrypoint.sh"],
            "Cmd": ["redis-server"],
            "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
            "WorkingDir": "/data",
            "ExposedPorts": {"6379/tcp": {}},
            "Volumes": {"/data": {}},
        }
        write_docker_archive(out, ref, layer, config, f"Debian redis-server {deb}")
    return ref, out


def pinned(name: str) -> str:
    """A version pinned in hack/versions.env, e.g. pinned("KUBERNETES_VERSION")."""
    versions = Path(__file__).resolve().parent.parent / "versions.env"
    match = re.search(rf"^{name}=(\S+)", versions.read_text(), re.M)
    if not match:
        sys.exit(f"error: {name} missing from {versions}")
    return match.group(1)


def kubernetes_module_dir() -> Path:
    """The pinned k8s.io/kubernetes module source (fetched from the Go proxy if needed)."""
    version = pinned("KUBERNETES_VERSION")
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"}
    with tempfile.TemporaryDirectory() as tmp:
        # `go mod download` needs no module of its own, but must not pick up
        # an unrelated go.mod from the working directory.
        result = subprocess.run(
            ["go", "mod", "download", "-json", f"{KUBERNETES_MODULE}@{version}"],
            capture_output=True,
            text=True,
            cwd=tmp,
            env=env,
        )
    if result.returncode != 0:
        sys.exit(f"error: cannot fetch {KUBERNETES_MODULE}: {result.stdout}{result.stderr}")
    return Path(json.loads(result.stdout)["Dir"])


def build_pause(cache: Path) -> tuple[str, Path]:
    src_dir = kubernetes_module_dir() / "build" / "pause"
    tag_match = re.search(r"^TAG \?= (\S+)", (src_dir / "Makefile").read_text(), re.M)
    if not tag_match:
        sys.exit(f"error: no TAG in {src_dir / 'Makefile'}")
    tag = tag_match.group(1)
    ref = f"registry.k8s.io/pause:{tag}"
    source = (src_dir / "linux" / "pause.c").read_bytes()
    key = hashlib.sha256(source).hexdigest()[:12]
    out = cache / f"pause-{tag}-{key}-{SCRIPT_HASH}.tar"
    if not out.exists():
        with tempfile.TemporaryDirectory() as tmp:
            binary = Path(tmp) / "pause"
            # The flags upstream's build/pause/Makefile uses.
            subprocess.run(
                [
                    "gcc",
                    "-Os",
                    "-Wall",
                    "-Werror",
                    "-static",
                    f"-DVERSION=v{tag}-local",
                    "-o",
                    str(binary),
                    str(src_dir / "linux" / "pause.c"),
                ],
                check=True,
            )
            subprocess.run(["strip", str(binary)], check=True)
            layer = Layer()
            layer.add_file("/pause", binary.read_bytes(), 0o755)
        config: dict[str, object] = {"Entrypoint": ["/pause"], "User": "65535:65535"}
        write_docker_archive(out, ref, layer, config, f"pause.c of {KUBERNETES_MODULE}")
    return ref, out


def built_binary(cache: Path, component: str, version: str, binary: str) -> Path:
    """A binary ``hack/build.sh kueue`` left in <cache>/<component>-<version>/bin."""
    path = cache.parent / f"{component}-{version}" / "bin" / binary
    if not path.is_file():
        sys.exit(f"error: {path} is missing: run hack/build.sh kueue")
    return path


def keyed_archive(cache: Path, name: str, tag: str, binary: Path) -> Path:
    """An archive path keyed by the binary's content and this script."""
    key = hashlib.sha256(binary.read_bytes()).hexdigest()[:12]
    return cache / f"{name}-{tag}-{key}-{SCRIPT_HASH}.tar"


def build_kueue(cache: Path) -> tuple[str, Path]:
    """Kueue's manager as its release image ships it: distroless's nonroot user,
    /manager as the entrypoint, a writable /tmp for the webhook certificates."""
    version = pinned("KUEUE_VERSION")
    manager = built_binary(cache, "kueue", version, "manager")
    ref = f"registry.k8s.io/kueue/kueue:{version}"
    out = keyed_archive(cache, "kueue", version, manager)
    if not out.exists():
        layer = Layer()
        etc_files(layer, [("root", 0), ("nonroot", 65532)])
        layer.add_file("/manager", manager.read_bytes(), 0o755)
        config: dict[str, object] = {"Entrypoint": ["/manager"], "User": "65532:65532"}
        write_docker_archive(out, ref, layer, config, f"sigs.k8s.io/kueue {version} cmd/kueue")
    return ref, out


def build_agnhost(cache: Path) -> tuple[str, Path]:
    """Kubernetes' e2e test image agnhost, tagged with the VERSION of the pinned
    module's test/images/agnhost; a shell and curl as in upstream's image, for
    the specs that `kubectl exec` one."""
    kubernetes = pinned("KUBERNETES_VERSION")
    agnhost = built_binary(cache, "agnhost", kubernetes, "agnhost")
    version_file = kubernetes_module_dir() / "test" / "images" / "agnhost" / "VERSION"
    tag = version_file.read_text().strip()
    ref = f"registry.k8s.io/e2e-test-images/agnhost:{tag}"
    out = keyed_archive(cache, "agnhost", tag, agnhost)
    if not out.exists():
        layer = Layer()
        etc_files(layer, [("root", 0)])
        add_busybox(layer)
        layer.add_binary_with_libs("/usr/bin/curl")
        layer.add_file("/agnhost", agnhost.read_bytes(), 0o755)
        config: dict[str, object] = {
            "Entrypoint": ["/agnhost"],
            "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
        }
        write_docker_archive(out, ref, layer, config, f"k8s.io/kubernetes {kubernetes} agnhost")
    return ref, out


BUILDERS = {"busybox": build_busybox, "redis": build_redis, "pause": build_pause}
# Built on request only, from binaries hack/build.sh kueue made first.
ON_REQUEST = {"kueue": build_kueue, "agnhost": build_agnhost}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache-dir", type=Path, required=True)
    parser.add_argument(
        "images",
        nargs="*",
        help=f"any of {', '.join(BUILDERS | ON_REQUEST)} (default: {', '.join(BUILDERS)})",
    )
    args = parser.parse_args()
    every = BUILDERS | ON_REQUEST
    unknown = set(args.images) - set(every)
    if unknown:
        expected = ", ".join(every)
        parser.error(f"unknown image(s) {', '.join(sorted(unknown))}; expected {expected}")
    cache = args.cache_dir / "images"
    for name in args.images or list(BUILDERS):
        ref, path = every[name](cache)
        print(ref, path)


if __name__ == "__main__":
    main()
