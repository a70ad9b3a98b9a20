"""The hack/ scripts and the Makefile on a fresh machine. Pure: files only.

- Every command they require (``require_cmd X``, or ``type -P X`` / ``command -v X`` whose
  failure ends the script) is provided by a Debian package of ``hack/prereqs.txt``, by the
  project's own builds (``hack/build.sh``), or is one of the machine's few preconditions.
- Every make target that can reach such a requirement runs the step that provides it first:
  ``prereqs`` for a package's command, ``build`` for a built one. A script that installed a
  package halfway through, after another had required it, is what this catches.
- No script fetches from a fixed http(s) URL: hosts come from the machine's configuration
  (GOPROXY, apt sources, the container engine's registries, ``PJ_*`` settings); only
  loopback and cluster addresses are written out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest

REPO = Path(__file__).resolve().parents[2]
HACK = REPO / "hack"

# What the README asks of the machine before its two commands, and Debian's essential set.
PRECONDITIONS = {
    "go": "README: Go 1.26 on PATH",
    "python3": "the machine's Python 3.11 (Debian 12)",
    "apt-get": "Debian's package manager, which installs the rest",
    "dpkg-query": "Debian's package manager",
}

_REQUIRE_CMD = re.compile(r"^\s*require_cmd\s+(\"?)(\$?[\w.-]+)\1", re.M)
# `type -P X` or `command -v X` whose failure ends the script or marks it failed.
_FAILS = r"(?:die\b|exit\b|\{[^}\n]*(?:missing=1|die\b|exit\b))"
_PROBE_OR_FAIL = re.compile(r"(?:type -P|command -v)\s+(\$?[\w.-]+)[^|\n]*\|\|\s*" + _FAILS)
_SCRIPT_REF = re.compile(r"(?:\$HACK_DIR|\bhack)/([\w-]+\.sh)\b")
_MAKE_CALL = re.compile(r"\bmake\b[^\n|;&]*?\s([a-z][a-z-]*)\s*$", re.M)
_URL = re.compile(r"https?://[^\s\"'`)<>]+")


@dataclass
class Requirement:
    command: str
    where: str


@dataclass
class Target:
    name: str
    deps: list[str]
    recipe: list[str] = field(default_factory=list)


def provided_by_packages(text: str) -> dict[str, str]:
    """command -> the package of hack/prereqs.txt that provides it."""
    provided: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        package, commands, *_ = line.split()
        for command in commands.split(","):
            if command != "-":
                provided[command] = package
    return provided


def built_commands(build_sh: str) -> set[str]:
    """The binaries hack/build.sh builds: its KUBE_COMMANDS and KEDA_COMMANDS, each
    build_wrapped's BINARY and each build_kube_commands' commands."""
    build_sh = re.sub(r"\\\n\s*", " ", build_sh)  # continuation lines joined
    build_sh = "\n".join(
        line for line in build_sh.splitlines() if not line.lstrip().startswith("#")
    )
    built: set[str] = set()
    kube = re.search(r"^KUBE_COMMANDS=\(([^)]*)\)", build_sh, re.M)
    if kube:
        built.update(kube.group(1).split())
    keda = re.search(r"^declare -A KEDA_COMMANDS=\(([^)]*)\)", build_sh, re.M)
    if keda:
        built.update(re.findall(r"\[([\w-]+)\]=", keda.group(1)))
    for args in re.findall(r"\bbuild_wrapped\s+([^;\n]*)", build_sh):
        words = args.split()
        if len(words) >= 5 and not words[0].startswith("$"):
            built.add(words[4])
    for args in re.findall(r"^\s*build_kube_commands\s+(.*)$", build_sh, re.M):
        built.update(w for w in args.split()[1:] if not w.startswith(('"', "$")))
    return built


def _loop_words(text: str, at: int, var: str) -> list[str]:
    """The words of the nearest `for VAR in WORDS; do` before offset ``at``."""
    loops = re.findall(rf"for {re.escape(var)} in ([^;\n]*); do", text[:at])
    return loops[-1].split() if loops else []


def requirements(name: str, text: str) -> list[Requirement]:
    """The commands a script (or the Makefile) requires, a loop variable resolved."""
    found: list[Requirement] = []
    for pattern in (_REQUIRE_CMD, _PROBE_OR_FAIL):
        for match in pattern.finditer(text):
            word = match.group(match.lastindex or 1)
            line = text.count("\n", 0, match.start()) + 1
            commands = (
                _loop_words(text, match.start(), word[1:]) if word.startswith("$") else [word]
            )
            assert commands, f"{name}:{line}: cannot tell which command {word} is"
            found += [Requirement(c, f"{name}:{line}") for c in commands]
    return found


def script_calls(text: str) -> tuple[set[str], set[str]]:
    """The hack/ scripts a script runs or sources, and the make targets it runs."""
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    return set(_SCRIPT_REF.findall(code)), set(_MAKE_CALL.findall(code))


def parse_makefile(text: str) -> dict[str, Target]:
    targets: dict[str, Target] = {}
    current: Target | None = None
    for line in text.splitlines():
        rule = re.match(r"^([a-z][a-z-]*):(?!=)\s*([^#]*)", line)
        if rule:
            deps = [d for d in rule.group(2).split() if re.fullmatch(r"[a-z][a-z-]*", d)]
            current = targets[rule.group(1)] = Target(rule.group(1), deps)
        elif line.startswith("\t") and current is not None:
            current.recipe.append(line.strip())
        elif line and not line.startswith("\t"):
            current = None
    return targets


@dataclass
class Tree:
    """The scripts and Makefile of one checkout."""

    root: Path

    def script(self, name: str) -> str:
        return (self.root / "hack" / name).read_text()

    def scripts(self) -> list[str]:
        return sorted(p.name for p in (self.root / "hack").glob("*.sh"))

    def makefile(self) -> dict[str, Target]:
        return parse_makefile((self.root / "Makefile").read_text())

    def provided(self) -> tuple[dict[str, str], set[str]]:
        return (
            provided_by_packages(self.script("prereqs.txt")),
            built_commands(self.script("build.sh")),
        )

    def reached(self, target: str) -> tuple[set[str], list[Requirement]]:
        """Every script target's recipe may run, transitively, and what they require."""
        targets = self.makefile()
        scripts: set[str] = set()
        found: list[Requirement] = []
        pending_targets, seen_targets = [target], set()
        pending_scripts: list[str] = []
        while pending_targets or pending_scripts:
            if pending_scripts:
                name = pending_scripts.pop()
                if name in scripts or not (self.root / "hack" / name).exists():
                    continue
                scripts.add(name)
                text = self.script(name)
                found += requirements(f"hack/{name}", text)
                called, made = script_calls(text)
                pending_scripts += called
                pending_targets += [t for t in made if t in targets]
                continue
            name = pending_targets.pop()
            if name in seen_targets:
                continue
            seen_targets.add(name)
            recipe = "\n".join(targets[name].recipe)
            found += requirements(f"Makefile:{name}", recipe)
            pending_scripts += script_calls(recipe)[0]
            pending_targets += [t for t in targets[name].deps if t in targets]
        return scripts, found

    def runs_first(self, target: str) -> set[str]:
        """The targets make runs before ``target``'s recipe (its deps, transitively)."""
        targets = self.makefile()
        seen: set[str] = set()
        pending = list(targets[target].deps)
        while pending:
            dep = pending.pop()
            if dep in seen or dep not in targets:
                continue
            seen.add(dep)
            pending += targets[dep].deps
        return seen


def missing_steps(tree: Tree) -> list[str]:
    """Each required command no step provides, and each target that reaches a requirement
    without running first the step that provides it."""
    packages, built = tree.provided()
    problems: list[str] = []
    for target in sorted(tree.makefile()):
        first = tree.runs_first(target) | {target}
        for req in tree.reached(target)[1]:
            if req.command in PRECONDITIONS:
                continue
            if req.command in packages:
                if "prereqs" not in first:
                    problems.append(
                        f"make {target}: {req.where} requires {req.command} "
                        f"({packages[req.command]}) but {target} does not run prereqs first"
                    )
            elif req.command in built:
                if "build" not in first:
                    problems.append(
                        f"make {target}: {req.where} requires {req.command} "
                        f"(hack/build.sh) but {target} does not run build first"
                    )
            else:
                problems.append(
                    f"make {target}: {req.where} requires {req.command}, which neither "
                    "hack/prereqs.txt nor hack/build.sh provides"
                )
    return sorted(set(problems))


def fixed_urls(tree: Tree) -> list[str]:
    """Every http(s) URL written in a hack/ file whose host is neither loopback, a
    cluster address, nor taken from a variable."""
    found = []
    for path in sorted((tree.root / "hack").rglob("*")):
        if not path.is_file():
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for match in _URL.finditer(text):
            if not allowed_url(match.group()):
                line = text.count("\n", 0, match.start()) + 1
                found.append(f"{path.relative_to(tree.root)}:{line}: {match.group()}")
    return found


def allowed_url(url: str) -> bool:
    netloc = urlsplit(url).netloc
    if netloc.startswith("$"):
        return True  # a setting or a cluster address the script computed
    host = urlsplit(url).hostname or ""
    return (
        host in {"localhost", "::1"}
        or host.startswith("127.")
        or host.endswith((".svc", ".svc.cluster.local", ".cluster.local"))
    )


# --- the pure parsing, on small inputs ------------------------------------------------


def test_requirements_resolve_a_loop_variable_and_skip_fallbacks() -> None:
    text = (
        'for cmd in runc ip; do\n  require_cmd "$cmd" "run make prereqs"\ndone\n'
        'require_cmd gcc "hint"\n'
        'type -P kind >/dev/null || { missing=1; echo "no kind" >&2; }\n'
        'command -v foo >/dev/null || die "no foo"\n'
        "DOCKER=$(command -v docker || echo /usr/bin/docker)\n"
        "if command -v bar >/dev/null; then :; fi\n"
    )
    assert [r.command for r in requirements("x.sh", text)] == ["runc", "ip", "gcc", "kind", "foo"]


def test_a_package_line_lists_what_it_provides() -> None:
    text = (
        "# comment\n\ndocker.io|docker-ce  docker,dockerd  the engine\nlibc6-dev  -  static libc\n"
    )
    assert provided_by_packages(text) == {
        "docker": "docker.io|docker-ce",
        "dockerd": "docker.io|docker-ce",
    }


def test_built_commands_are_read_from_build_sh() -> None:
    text = (
        "KUBE_COMMANDS=(kube-apiserver kubectl)\n"
        "declare -A KEDA_COMMANDS=([keda]=cmd/operator [keda-adapter]=cmd/adapter)\n"
        'build_etcd() { build_wrapped etcd "$V" go.etcd.io/x go.etcd.io/x etcd; }\n'
        "  build_kube_commands kubeadm kubeadm\n"
    )
    assert built_commands(text) == {
        "kube-apiserver",
        "kubectl",
        "keda",
        "keda-adapter",
        "etcd",
        "kubeadm",
    }


def test_a_target_reaching_a_requirement_without_its_step_is_reported(tmp_path: Path) -> None:
    (tmp_path / "hack").mkdir()
    (tmp_path / "hack" / "prereqs.txt").write_text("docker.io  docker,dockerd  engine\n")
    (tmp_path / "hack" / "build.sh").write_text("KUBE_COMMANDS=(kubectl)\n")
    (tmp_path / "hack" / "a.sh").write_text('"$HACK_DIR/b.sh" start\n')
    (tmp_path / "hack" / "b.sh").write_text('require_cmd dockerd "hint"\nrequire_cmd kubectl "x"\n')
    (tmp_path / "Makefile").write_text(
        "prereqs:\n\t@hack/install.sh\nbuild:\n\t@hack/build.sh\n"
        "good: prereqs build ## x\n\t@hack/a.sh\nbad: ## y\n\t@hack/a.sh\n"
    )
    problems = missing_steps(Tree(tmp_path))
    assert problems == [
        "make bad: hack/b.sh:1 requires dockerd (docker.io) but bad does not run prereqs first",
        "make bad: hack/b.sh:2 requires kubectl (hack/build.sh) but bad does not run build first",
    ]


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("http://127.0.0.1:2379/health", True),
        ("https://localhost:6443", True),
        ("https://$BRIDGE_IP:$APISERVER_PORT", True),
        ("https://kubernetes.default.svc.cluster.local", True),
        ("https://$PJ_REGISTRY/v2/", True),
        ("https://example.org/debian", False),
        ("http://10.0.0.1/x", False),
    ],
)
def test_allowed_urls(url: str, allowed: bool) -> None:
    assert allowed_url(url) is allowed


# --- this checkout ------------------------------------------------------------------


def test_every_required_command_is_installed_or_built_by_the_step_its_target_runs_first() -> None:
    assert missing_steps(Tree(REPO)) == []


def test_the_requirement_parser_sees_this_checkouts_requirements() -> None:
    """Guards the test above against a parser that silently finds nothing."""
    _, found = Tree(REPO).reached("demo")
    commands = {r.command for r in found}
    assert {"dockerd", "containerd", "kubectl"} <= commands, commands


def test_no_hack_script_fetches_from_a_fixed_url() -> None:
    assert fixed_urls(Tree(REPO)) == []
