"""The layers hold: the core is pure and the settings are a leaf. Pure: reads the source.

- ``paralleljob.core`` imports only the standard library (no asyncio), itself and the
  package's leaves; never the shell, the kopf wiring, or an I/O library.
- ``paralleljob.config`` imports only the standard library and leaves.
- A leaf imports nothing of the package but other leaves.
- No import cycle among the package's modules (hack/layers.py finds them).
- Only the shell, the kopf wiring (handlers.py, cli.py) and the worker import an I/O library.
- The caches import no controller, even through another module: informers publish, the
  controllers subscribe (runtime/subscribers.py).
- Outside the core, the core is imported through its facade (``paralleljob.core``) only.
- No import chain in the shell is longer than 6 modules.
- docs/design.md's layer figures are what hack/layers.py prints.
"""

from __future__ import annotations

import ast
import itertools
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "operator" / "paralleljob"
sys.path.insert(0, str(PACKAGE.parents[1] / "hack"))
from layers import (  # noqa: E402
    around_the_facade,
    cycles,
    import_graph,
    layer_of,
    layer_table,
    longest_chain,
    traced_path,
)

LEAVES = {"paralleljob.constants", "paralleljob.json_types", "paralleljob.timeutil"}
IO_LIBRARIES = {"asyncio", "aiohttp", "kopf", "kubernetes", "prometheus_client", "redis"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    return imports_of(path.read_text(), module_name(path), path.name == "__init__.py")


def imports_of(source: str, name: str, is_package: bool = False) -> set[str]:
    """Every module ``source`` (module ``name``) imports, relative imports resolved,
    lazy ones included."""
    package = name if is_package else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            found.add(base)
            # `from . import x` imports the module x, not a name of the package.
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def package_modules() -> set[str]:
    return {module_name(p) for p in PACKAGE.rglob("*.py")}


def _own(found: set[str]) -> set[str]:
    """The package's own modules among ``found`` (names of a module's members dropped)."""
    modules = package_modules()
    return {m for m in found if m in modules}


def _foreign(found: set[str]) -> set[str]:
    return {m.split(".")[0] for m in found if not m.startswith("paralleljob")}


def core_problems(found: set[str]) -> list[str]:
    bad = sorted(_foreign(found) & IO_LIBRARIES)
    bad += sorted(
        m
        for m in _own(found)
        if not (
            m.startswith("paralleljob.core") or m in LEAVES | {"paralleljob", "paralleljob.config"}
        )
    )
    return bad


def leaf_problems(found: set[str], allowed: set[str]) -> list[str]:
    return sorted(m for m in _own(found) if m not in allowed and m != "paralleljob") + sorted(
        _foreign(found) & IO_LIBRARIES
    )


CORE_FILES = sorted((PACKAGE / "core").rglob("*.py"))


def test_the_core_has_modules() -> None:
    assert len(CORE_FILES) > 5


@pytest.mark.parametrize("path", CORE_FILES, ids=lambda p: p.name)
def test_a_core_module_is_pure(path: Path) -> None:
    assert core_problems(imports(path)) == []


def test_config_is_a_leaf() -> None:
    assert leaf_problems(imports(PACKAGE / "config.py"), LEAVES) == []


@pytest.mark.parametrize("name", sorted(LEAVES))
def test_a_leaf_imports_only_leaves(name: str) -> None:
    path = PACKAGE / f"{name.rsplit('.', 1)[1]}.py"
    assert leaf_problems(imports(path), LEAVES) == []


def test_the_checks_see_an_impure_module() -> None:
    """The checks above can fail: a core module importing asyncio, kopf and the shell."""
    source = (
        "import asyncio\nfrom ..jobs import controller\nfrom . import model\n"
        "def f():\n    import kopf\n    from ..handlers import startup\n"
    )
    found = imports_of(source, "paralleljob.core.probe")
    assert core_problems(found) == [
        "asyncio",
        "kopf",
        "paralleljob.handlers",
        "paralleljob.jobs",
        "paralleljob.jobs.controller",
    ]


def test_the_leaf_check_sees_a_package_import() -> None:
    found = imports_of("from .jobs.controller import Controller\n", "paralleljob.config")
    assert leaf_problems(found, LEAVES) == ["paralleljob.jobs.controller"]


def test_the_layers_script_prints_the_layers_and_a_pod_event_s_path() -> None:
    script = PACKAGE.parents[1] / "hack" / "layers.py"
    static = subprocess.run([sys.executable, script], capture_output=True, text=True, check=True)
    assert "core" in static.stdout and "longest function:" in static.stdout
    assert "import cycles: none" in static.stdout
    traced = subprocess.run(
        [sys.executable, script, "--trace"], capture_output=True, text=True, check=True
    )
    assert "runtime.caches Caches.pod_changed" in traced.stdout
    assert "calls over" in traced.stdout


def test_the_pod_event_s_way_in_the_design_is_the_traced_one() -> None:
    """docs/design.md shows what the trace prints, so that it cannot drift."""
    design = (PACKAGE.parents[1] / "docs" / "design.md").read_text()
    block = design.split("<!-- BEGIN make layers --trace -->\n```\n", 1)[1]
    block = block.split("\n```\n<!-- END make layers --trace -->", 1)[0]
    path = traced_path()
    assert block.splitlines() == path.lines()
    assert path.event[0] == "runtime.caches Caches.pod_changed"
    assert path.write == "create_pod (the API)"
    assert "core.job.sync.plan_pods" in path.decisions


def test_no_import_cycle() -> None:
    assert cycles(import_graph()) == []


def test_the_cycle_check_sees_a_cycle() -> None:
    """It can fail: a cycle of two, one of three beside a chain, a self-import ignored."""
    graph = {
        "a": {"b"},
        "b": {"a", "c"},
        "c": {"d"},
        "d": {"e"},
        "e": {"c", "e"},
        "f": {"a"},
    }
    assert cycles(graph) == [["a", "b"], ["c", "d", "e"]]


def test_the_graph_sees_the_package_s_imports() -> None:
    graph = import_graph()
    assert "paralleljob.core.job.model" in graph["paralleljob.core.job.sync"]
    assert "paralleljob.jobs.job_runtime" in graph["paralleljob.jobs.job_loops"]


#: Outside the shell's packages: the kopf wiring, and the worker (a program of its own).
IO_ALLOWED = {"paralleljob.handlers", "paralleljob.cli"}


def io_outside_the_shell(modules: dict[str, set[str]]) -> list[str]:
    """The modules of ``modules`` (name: what it imports) that import an I/O library but
    are not the shell's, the wiring's or the worker's."""
    return sorted(
        name
        for name, found in modules.items()
        if _foreign(found) & IO_LIBRARIES
        and layer_of(name) not in ("shell", "worker")
        and name not in IO_ALLOWED
    )


def test_all_i_o_is_in_the_shell() -> None:
    modules = {module_name(p): imports(p) for p in PACKAGE.rglob("*.py")}
    assert "paralleljob.runtime.kube" in modules
    assert io_outside_the_shell(modules) == []


def test_the_i_o_check_sees_a_module_outside_the_shell() -> None:
    modules = {
        "paralleljob.caches": {"asyncio", "paralleljob.runtime.kube"},
        "paralleljob.runtime.caches": {"asyncio"},
        "paralleljob.handlers": {"kopf"},
        "paralleljob.core.job.sync": {"dataclasses"},
    }
    assert io_outside_the_shell(modules) == ["paralleljob.caches"]


#: The controllers: what the caches feed through the subscriber protocols, never import.
CONTROLLERS = {
    "paralleljob.jobs.controller",
    "paralleljob.cron.cron_controller",
    "paralleljob.kueue.kueue_controller",
    "paralleljob.jobs.job_loops",
    "paralleljob.jobs.job_sync",
    "paralleljob.runtime.sync_loops",
}
#: The longest import chain the shell may have, in modules.
MAX_SHELL_CHAIN = 6


def reached(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for target in graph.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def test_the_caches_import_no_controller() -> None:
    graph = import_graph()
    assert "paralleljob.runtime.subscribers" in reached(graph, "paralleljob.runtime.caches")
    assert sorted(reached(graph, "paralleljob.runtime.caches") & CONTROLLERS) == []


def test_the_controller_check_sees_one_imported_on_the_way() -> None:
    graph = {
        "paralleljob.runtime.caches": {"paralleljob.runtime.job_records"},
        "paralleljob.runtime.job_records": {"paralleljob.jobs.controller"},
    }
    found = reached(graph, "paralleljob.runtime.caches") & CONTROLLERS
    assert found == {"paralleljob.jobs.controller"}


def test_the_core_is_imported_through_its_facade() -> None:
    assert around_the_facade(import_graph()) == []


def test_the_facade_check_sees_an_import_around_it() -> None:
    graph = {
        "paralleljob.runtime.kube": {"paralleljob.core", "paralleljob.core.job.kind"},
        "paralleljob.core.job.sync": {"paralleljob.core.job.model"},
    }
    assert around_the_facade(graph) == [("paralleljob.runtime.kube", "paralleljob.core.job.kind")]


def test_no_import_chain_in_the_shell_is_long() -> None:
    chain = longest_chain(import_graph(), "shell")
    assert 1 < len(chain) <= MAX_SHELL_CHAIN, " -> ".join(chain)


def test_the_chain_check_sees_a_long_chain() -> None:
    names = [f"paralleljob.runtime.m{i}" for i in range(MAX_SHELL_CHAIN + 1)]
    graph = {a: {b} for a, b in itertools.pairwise(names)}
    graph[names[0]].add("paralleljob.core")
    assert longest_chain(graph, "shell") == names


def test_the_design_s_layer_figures_are_the_script_s() -> None:
    """docs/design.md's table is generated (python3 hack/layers.py --docs writes it)."""
    design = (PACKAGE.parents[1] / "docs" / "design.md").read_text()
    block = design.split("<!-- BEGIN make layers -->\n", 1)[1]
    block = block.split("\n<!-- END make layers -->", 1)[0]
    assert block.splitlines() == layer_table()
