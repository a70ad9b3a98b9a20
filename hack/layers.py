#!/usr/bin/env python3
"""The operator's architecture in figures (make layers).

    python3 hack/layers.py           the layers: modules and lines per layer, the imports
                                     that cross layers, the longest class and function
    python3 hack/layers.py --trace   one pod event traced from the kopf handler to the
                                     first API write: the calls that cross a module
                                     boundary, in order

Static figures read the source (ast); the trace runs the real handler and controller
against the unit tests' in-memory API (tests/unit/fake_api.py) in this process.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import sys
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType
from typing import Any, cast

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "operator" / "paralleljob"
LEAVES = ("constants", "json_types", "timeutil", "config")


def layer_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in ("core", "shell", "worker"):
        return parts[1]
    if len(parts) > 1 and parts[1] in LEAVES:
        return "leaves"
    return "wiring"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@dataclass
class Longest:
    name: str = ""
    lines: int = 0

    def offer(self, name: str, lines: int) -> None:
        if lines > self.lines:
            self.name, self.lines = name, lines


def imported(tree: ast.Module, module: str, is_package: bool) -> set[str]:
    package = module if is_package else module.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join([*anchor, *([node.module] if node.module else [])])
            if node.module:  # `from .. import x` imports x, not the package
                found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("paralleljob"):
            found.add(node.module or "")
    return found


def import_graph() -> dict[str, set[str]]:
    """Each module of the package and the package's modules it imports (lazy and
    type-checking imports included: a cycle there is one in the design). ``from . import
    x`` of a module x is an edge to x, not to the package."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                named = {f"{base}.{a.name}" for a in node.names} & modules.keys()
                edges |= named or ({base} & modules.keys())
            elif isinstance(node, ast.Import):
                edges |= {a.name for a in node.names} & modules.keys()
        graph[name] = edges - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of ``graph``: its strongly connected components of more than one
    module (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(graph.get(module, ())):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = [stack.pop()]
            while component[-1] != module:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(found)


def _size(node: ast.stmt) -> int:
    return (node.end_lineno or node.lineno) - node.lineno + 1


def static_report() -> None:
    files = sorted(p for p in PACKAGE.rglob("*.py"))
    modules = {module_name(p): p for p in files}
    per_layer: Counter[str] = Counter()
    lines: Counter[str] = Counter()
    longest_class, longest_function = Longest(), Longest()
    crossings: Counter[tuple[str, str]] = Counter()
    for name, path in modules.items():
        source = path.read_text()
        tree = ast.parse(source)
        layer = layer_of(name)
        per_layer[layer] += 1
        lines[layer] += source.count("\n")
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                longest_class.offer(f"{name}.{node.name}", _size(node))
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                longest_function.offer(f"{name}.{node.name}", _size(node))
        for target in imported(tree, name, path.name == "__init__.py"):
            if target in modules and layer_of(target) != layer:
                crossings[(layer, layer_of(target))] += 1
    print("layer    modules  lines")
    for layer in ("core", "shell", "wiring", "leaves", "worker"):
        print(f"{layer:<8} {per_layer[layer]:>7}  {lines[layer]:>5}")
    print("\nimports across layers (from -> to: count)")
    for (src, dst), count in sorted(crossings.items()):
        print(f"  {src} -> {dst}: {count}")
    found = cycles(import_graph())
    print("\nimport cycles: " + ("none" if not found else ""))
    for cycle in found:
        print("  " + " <-> ".join(cycle))
    print(f"\nlongest class:    {longest_class.name} ({longest_class.lines} lines)")
    print(f"longest function: {longest_function.name} ({longest_function.lines} lines)")


# --- the pod-event trace ------------------------------------------------------------


def trace_report() -> None:
    sys.path.insert(0, str(REPO))
    from tests.unit.fake_api import FakeApi, FakeRecorder

    calls = asyncio.run(_trace(FakeApi, FakeRecorder))
    crossing = [(a, b) for a, b in calls if a != b]
    print("a pod's success, from caches.pod_changed to the first API write:")
    for caller, callee in crossing:
        print(f"  {caller} -> {callee}")
    touched = {m for pair in crossing for m in pair}
    print(f"\n{len(crossing)} module crossings through {len(touched)} modules")


WRITES = {"create_pod", "delete_pod", "patch_job", "patch_job_status", "remove_pod_finalizer"}


async def _trace(fake_api: Any, fake_recorder: Any) -> list[tuple[str, str]]:
    from paralleljob import constants as c
    from paralleljob.caches import Caches
    from paralleljob.config import MANAGE_JOBS_OFF, ControllerConfig, OperatorConfig
    from paralleljob.core.kind import PARALLELJOB
    from paralleljob.core.model import parse_pod
    from paralleljob.shell.controller import Controller

    job = {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "metadata": {"name": "job", "namespace": "ns", "uid": "job-uid"},
        "spec": {
            "completions": 2,
            "parallelism": 1,
            "completionMode": "NonIndexed",
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c"}]}},
        },
    }
    api = fake_api(job)
    config = ControllerConfig(sync_batch_seconds=0.0, status_batch_seconds=0.0)
    controller = Controller(api, fake_recorder(), config, api.pods_of, job_exists=lambda u: True)
    caches = Caches(cast(Any, None), OperatorConfig(manage_jobs=MANAGE_JOBS_OFF))
    caches.controllers = {PARALLELJOB.kind: controller}
    controller.job_seen(api.job)
    await _until(lambda: len(api.pods) == 1 and _idle(controller))
    [pod] = api.pods.values()
    body = _succeeded_pod_body(pod, c)
    api.pods[pod.uid] = replace(parse_pod(body, PARALLELJOB), uid=pod.uid)
    before = len(api.calls)
    recorded: list[tuple[str, str]] = []

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event != "call":
            return
        callee = frame.f_globals.get("__name__", "")
        if callee == "tests.unit.fake_api" and frame.f_code.co_name in WRITES:
            sys.setprofile(None)
            return
        caller = frame.f_back.f_globals.get("__name__", "") if frame.f_back else ""
        if callee.startswith("paralleljob") and caller.startswith("paralleljob"):
            recorded.append((caller, callee))

    sys.setprofile(profile)
    caches.pod_changed(None, caches.read_pod(body), gone=False)
    await _until(lambda: len(api.calls) > before)
    sys.setprofile(None)
    await controller.stop_all()
    return recorded


def _idle(controller: Any) -> bool:
    return all(
        rt.loop.sync_started is None and not rt.loop.woken for rt in controller.jobs.values()
    )


def _succeeded_pod_body(pod: Any, c: Any) -> dict[str, Any]:
    finished = "2026-01-01T12:00:00Z"
    return {
        "metadata": {
            "name": pod.name,
            "namespace": "ns",
            "uid": pod.uid,
            "labels": {c.LABEL_CONTROLLER_UID: "job-uid", c.LABEL_JOB_NAME: "job"},
            "finalizers": [c.TRACKING_FINALIZER],
            "ownerReferences": [
                {
                    "apiVersion": c.API_VERSION,
                    "kind": c.KIND,
                    "name": "job",
                    "uid": "job-uid",
                    "controller": True,
                }
            ],
        },
        "status": {
            "phase": c.SUCCEEDED,
            "containerStatuses": [
                {"name": "c", "state": {"terminated": {"exitCode": 0, "finishedAt": finished}}}
            ],
        },
    }


async def _until(condition: Any, timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.001)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", action="store_true", help="trace one pod event")
    args = parser.parse_args()
    if args.trace:
        trace_report()
    else:
        static_report()


if __name__ == "__main__":
    main()
