#!/usr/bin/env python3
"""The operator's architecture in figures (make layers).

    python3 hack/layers.py           the layers: modules and lines per layer, the imports
                                     that cross layers, the longest class and function
    python3 hack/layers.py --docs    both written into docs/design.md's generated blocks
    python3 hack/layers.py --trace   one pod event's way from the pod informer's handler
                                     to the first API write: the calls on the stack
                                     where the event is queued, those where the write
                                     is made, and the core's decisions between

Static figures read the source (ast), import cycles included; the trace runs the real
caches and controller against the unit tests' in-memory API (tests/unit/fake_api.py) in
this process. docs/design.md shows the trace (tests/unit/test_layers.py checks it).
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import dis
import sys
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType
from typing import Any, cast

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "operator" / "paralleljob"
LEAVES = ("constants", "json_types", "timeutil", "config")


#: The shell's packages, by domain: the runtime every kind runs on, leader election,
#: the two kinds' controllers, and the queued jobs' Workloads' (Kueue's protocol).
SHELL = ("runtime", "election", "jobs", "cron", "kueue")


def layer_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in SHELL:
        return "shell"
    if len(parts) > 1 and parts[1] in ("core", "worker"):
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


def longest_chain(graph: dict[str, set[str]], layer: str) -> list[str]:
    """The longest import chain among the modules of ``layer`` (the graph has no cycle:
    the layer test holds it to that)."""
    inside = {
        m: {d for d in deps if layer_of(d) == layer}
        for m, deps in graph.items()
        if layer_of(m) == layer
    }
    best: dict[str, list[str]] = {}

    def chain(module: str) -> list[str]:
        if module not in best:
            tails = [chain(d) for d in sorted(inside.get(module, ()))]
            best[module] = [module, *max(tails, key=len, default=[])]
        return best[module]

    return max((chain(m) for m in sorted(inside)), key=len, default=[])


def around_the_facade(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, core module) for each import of a core module other than the core's
    facade (``paralleljob.core``) from outside the core."""
    return sorted(
        (module, target)
        for module, deps in graph.items()
        if layer_of(module) != "core"
        for target in deps
        if layer_of(target) == "core" and target != "paralleljob.core"
    )


def layer_table() -> list[str]:
    """The layers' figures as docs/design.md shows them (a markdown table)."""
    per_layer: Counter[str] = Counter()
    lines: Counter[str] = Counter()
    for path in PACKAGE.rglob("*.py"):
        layer = layer_of(module_name(path))
        per_layer[layer] += 1
        lines[layer] += path.read_text().count("\n")
    names = {
        "core": "core",
        "shell": "shell",
        "wiring": "wiring (`handlers.py`, `cli.py`, the package)",
        "leaves": "leaves",
        "worker": "worker (`paralleljob-worker`)",
    }
    rows = [f"| {names[x]} | {per_layer[x]} | {lines[x]:,} |" for x in names]
    return ["| layer | modules | lines |", "| --- | --- | --- |", *rows]


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
    graph = import_graph()
    found = cycles(graph)
    print("\nimport cycles: " + ("none" if not found else ""))
    for cycle in found:
        print("  " + " <-> ".join(cycle))
    chain = longest_chain(graph, "shell")
    shown = " -> ".join(m.removeprefix("paralleljob.") for m in chain)
    print(f"\nlongest import chain in the shell: {len(chain)} modules ({shown})")
    print(f"imports of the core around its facade: {len(around_the_facade(graph))}")
    print("\nas docs/design.md shows them:\n" + "\n".join(layer_table()))
    print(f"\nlongest class:    {longest_class.name} ({longest_class.lines} lines)")
    print(f"longest function: {longest_function.name} ({longest_function.lines} lines)")


# --- the pod-event trace ------------------------------------------------------------


@dataclass(frozen=True)
class Path_:
    """A pod event's way through the operator: the calls on the stack when the event is
    handed to the job's loop (the informer's task), those on the stack at the first API
    write (a worker of the loops), and the core's decisions those made on the way."""

    event: list[str]
    sync: list[str]
    decisions: list[str]
    write: str

    def lines(self) -> list[str]:
        out = ["the pod event (the pod informer's task):"]
        out += [f"  {call}" for call in self.event]
        out += ["the job's sync (a worker of the job loops):"]
        out += [f"  {call}" for call in self.sync]
        out += [f"  decided by: {', '.join(self.decisions)}", f"  writes: {self.write}"]
        calls = [*self.event, *self.sync]
        modules = {call.rsplit(" ", 1)[0] for call in calls}
        out += [f"{len(calls)} calls over {len(modules)} modules to the write"]
        return out


def trace_report() -> None:
    print("\n".join(traced_path().lines()))


def traced_path() -> Path_:
    """The path of a pod's success, traced through the real caches and controller
    against the unit tests' in-memory API."""
    sys.path.insert(0, str(REPO))
    from tests.unit.fake_api import FakeApi, FakeRecorder

    return asyncio.run(_trace(FakeApi, FakeRecorder))


WRITES = {"create_pod", "delete_pod", "patch_job", "patch_job_status", "remove_pod_finalizer"}
PREFIX = "paralleljob."


#: What starts a task (asyncio's).
SPAWNS = {"gather", "create_task", "ensure_future"}


def _fresh(frame: FrameType) -> bool:
    """A coroutine's frame entered for the first time (a task's start), not resumed: at
    its first RESUME instruction."""
    first = next(i.offset for i in dis.get_instructions(frame.f_code) if i.opname == "RESUME")
    return frame.f_lasti == first


def _call(frame: FrameType) -> str:
    module = str(frame.f_globals.get("__name__", "")).removeprefix(PREFIX)
    return f"{module} {frame.f_code.co_qualname}"


def _stack(frame: FrameType | None) -> list[FrameType]:
    """The package's frames on the stack under ``frame``, outermost first."""
    frames = []
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith(PREFIX):
            frames.append(frame)
        frame = frame.f_back
    return frames[::-1]


async def _trace(fake_api: Any, fake_recorder: Any) -> Path_:
    from paralleljob import constants as c
    from paralleljob.config import MANAGE_JOBS_OFF, ControllerConfig, OperatorConfig
    from paralleljob.core.job.kind import PARALLELJOB
    from paralleljob.core.job.model import parse_pod
    from paralleljob.jobs.controller import Controller
    from paralleljob.runtime.caches import Caches

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
    handed: list[FrameType] = []
    written: list[FrameType] = []
    #: Each call of a core function from the shell: the frames on the stack, the call.
    into_core: list[tuple[set[int], str]] = []
    #: The stack that last spawned a task (gather, create_task), and each task's first
    #: frame with the stack that spawned it: a write in a task spawned by a sync is on
    #: that sync's way.
    spawner: list[FrameType] = []
    spawned_by: dict[int, tuple[FrameType, list[FrameType]]] = {}

    def logical(frames: list[FrameType]) -> list[FrameType]:
        roots: set[int] = set()
        while frames and id(frames[0]) in spawned_by and id(frames[0]) not in roots:
            roots.add(id(frames[0]))
            frames = [*spawned_by[id(frames[0])][1], *frames]
        return frames

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event != "call" or written:
            return
        callee = str(frame.f_globals.get("__name__", ""))
        caller = str(frame.f_back.f_globals.get("__name__", "")) if frame.f_back else ""
        if callee == "tests.unit.fake_api" and frame.f_code.co_name in WRITES:
            written.extend([*logical(_stack(frame.f_back)), frame])
        elif callee == "paralleljob.runtime.work_queue" and frame.f_code.co_name == "add":
            handed[:] = handed or _stack(frame)
        elif frame.f_code.co_name in SPAWNS and caller.startswith(PREFIX):
            spawner[:] = logical(_stack(frame.f_back))
        elif callee.startswith(PREFIX) and not caller.startswith(PREFIX) and _fresh(frame):
            spawned_by[id(frame)] = (frame, list(spawner))
        name = frame.f_code.co_qualname
        public = not name.startswith("_") and "<" not in name and "." not in name
        into = callee.startswith("paralleljob.core") and layer_of(caller) == "shell"
        if into and public:
            stack = logical(_stack(frame.f_back))
            into_core.append(({id(f) for f in stack}, _call(frame)))

    sys.setprofile(profile)
    caches.pod_changed(None, caches.read_pod(body), gone=False)
    await _until(lambda: len(api.calls) > before)
    sys.setprofile(None)
    await controller.stop_all()
    *sync, write = written
    on_stack = {id(f) for f in sync}
    decisions = [call for callers, call in into_core if callers & on_stack]
    return Path_(
        event=[_call(f) for f in handed],
        sync=[_call(f) for f in sync],
        decisions=list(dict.fromkeys(d.replace(" ", ".") for d in decisions)),
        write=f"{write.f_code.co_name} (the API)",
    )


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


def _replace_block(text: str, begin: str, end: str, lines: list[str]) -> str:
    head, rest = text.split(begin + "\n", 1)
    _, tail = rest.split("\n" + end, 1)
    return head + begin + "\n" + "\n".join(lines) + "\n" + end + tail


def write_docs() -> None:
    """docs/design.md's generated blocks: the layer table and the traced pod event."""
    design = REPO / "docs" / "design.md"
    text = _replace_block(
        design.read_text(), "<!-- BEGIN make layers -->", "<!-- END make layers -->", layer_table()
    )
    trace = ["```", *traced_path().lines(), "```"]
    text = _replace_block(
        text, "<!-- BEGIN make layers --trace -->", "<!-- END make layers --trace -->", trace
    )
    design.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", action="store_true", help="trace one pod event")
    parser.add_argument("--docs", action="store_true", help="write both into docs/design.md")
    args = parser.parse_args()
    if args.docs:
        write_docs()
    elif args.trace:
        trace_report()
    else:
        static_report()


if __name__ == "__main__":
    main()
