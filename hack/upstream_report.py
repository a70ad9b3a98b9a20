#!/usr/bin/env python3
"""The per-spec results of Kubernetes' e2e suite, read from the JUnit XML that
``e2e.test --report-dir=DIR`` writes there (``junit_01.xml``). Standard library only.

    upstream_report.py [--focus REGEX] [--skip REGEX] [--markdown FILE] [LABEL=]DIR...

Prints a table, one row per spec: its name, its result (passed, failed or skipped) and
its seconds, then one summary line per report directory. A spec is listed when it ran,
when it was skipped at run time (``e2eskipper``: the reason follows), or when it matches
the run's focus: the specs that were asked for, not the thousands the suite filtered
away. Of those that never ran, one that matches the skip pattern too was "filtered out";
any other was selected but "not run" (the run ended first: a suite timeout, an interrupt,
``--ginkgo.fail-fast``). The focus and skip patterns are the report's own (its
``FocusStrings`` and ``SkipStrings`` properties, which ginkgo joins with commas: a
pattern with a comma of its own needs ``--focus``/``--skip``). A suite node
(``[SynchronizedBeforeSuite]``, ...) is listed only when it failed, since then no spec
could run.

Several directories, each ``LABEL=DIR`` (e.g. ``builtin=... operator=...``), give one
result and one time column per label, side by side; ``--markdown`` also writes the table
as Markdown. The exit status is 1 when a listed spec or suite node failed or a selected
spec did not run, 2 when a
directory holds no JUnit report or no spec of it passed (and none failed), else 0.
"""

from __future__ import annotations

import argparse
import re
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"
NOT_RUN = "not run"  # counted among the skipped too
# ginkgo's spec states (types.SpecState), as the JUnit ``status`` attribute spells them.
_RESULTS = {
    "passed": PASSED,
    "skipped": SKIPPED,
    "pending": SKIPPED,
    "failed": FAILED,
    "timedout": FAILED,
    "interrupted": FAILED,
    "aborted": FAILED,
    "panicked": FAILED,
}
# The leaf node type ginkgo writes before the spec's text: "[It] [sig-apps] Job ...".
_LEAF = re.compile(r"^\[(It|[A-Za-z]*Suite[A-Za-z]*|DeferCleanup \(Suite\))\]\s*")


@dataclass(frozen=True)
class Spec:
    """One testcase of the report."""

    name: str  # the spec's full text, without the leaf node type
    result: str  # PASSED, FAILED or SKIPPED
    seconds: float
    status: str  # ginkgo's state: passed, failed, timedout, panicked, skipped, ...
    detail: str = ""  # why it was skipped, or the first line of its failure
    suite_node: bool = False  # [SynchronizedBeforeSuite] and the like, not a spec
    filtered: bool = False  # never started: filtered out, or the run ended first
    not_run: bool = False  # selected by the filters, yet never started
    suite: str = ""  # the suite's description, which the filters also see


@dataclass(frozen=True)
class Report:
    """The testcases of one report directory, and the suite's own run time."""

    specs: tuple[Spec, ...]
    seconds: float
    files: tuple[Path, ...] = ()
    focus: str = ""  # the run's --ginkgo.focus patterns, or-ed
    skip: str = ""  # and its --ginkgo.skip ones


def _first_line(text: str | None) -> str:
    for line in (text or "").splitlines():
        line = line.strip()
        if line:
            return line[:200]
    return ""


def parse_junit(text: str) -> Report:
    """The testcases of one JUnit XML document, as ginkgo v2 writes them."""
    root = ET.fromstring(text)
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    specs: list[Spec] = []
    seconds = 0.0
    focus = skip = ""
    for suite in suites:
        seconds += float(suite.get("time") or 0)
        properties = {p.get("name"): p.get("value", "") for p in suite.iter("property")}
        focus = focus or "|".join(filter(None, properties.get("FocusStrings", "").split(",")))
        skip = skip or "|".join(filter(None, properties.get("SkipStrings", "").split(",")))
        # ginkgo matches the patterns against the suite's description, a space, the text.
        prefix = f"{suite.get('name', '')} "
        for case in suite.iter("testcase"):
            raw = case.get("name", "").strip()
            leaf = _LEAF.match(raw)
            name = raw[leaf.end() :] if leaf else raw
            suite_node = bool(leaf and leaf.group(1) != "It")
            if suite_node:
                name = raw  # "[SynchronizedBeforeSuite]": its kind is its name
            problem = case.find("failure")
            if problem is None:
                problem = case.find("error")
            skipped = case.find("skipped")
            status = case.get("status") or (
                "failed" if problem is not None else "skipped" if skipped is not None else "passed"
            )
            result = _RESULTS.get(status, FAILED)
            detail, filtered = "", False
            if result == FAILED and problem is not None:
                detail = _first_line(problem.get("message")) or _first_line(problem.text)
            elif result == SKIPPED and skipped is not None:
                message = skipped.get("message", "")
                # ginkgo: "skipped" alone for a spec the filters left out, "skipped - WHY"
                # for one that called Skip.
                detail = message.removeprefix("skipped").removeprefix(" - ").strip()
                filtered = message.strip() == "skipped"
            specs.append(
                Spec(
                    name=name,
                    result=result,
                    seconds=float(case.get("time") or 0),
                    status=status,
                    detail=detail,
                    suite_node=suite_node,
                    filtered=filtered,
                    not_run=filtered and bool(focus) and _selects(focus, skip, prefix + name),
                    suite=prefix.strip(),
                )
            )
    return Report(tuple(specs), seconds, focus=focus, skip=skip)


def _selects(focus: str, skip: str, text: str) -> bool:
    """Whether ginkgo's focus and skip patterns select ``text``."""
    return bool(re.search(focus, text)) and not (skip and re.search(skip, text))


def read_dir(directory: Path) -> Report:
    """Every ``junit*.xml`` directly in ``directory`` (e2e.test writes ``junit_01.xml``)."""
    files = tuple(sorted(directory.glob("junit*.xml")))
    specs: list[Spec] = []
    seconds = 0.0
    focus = skip = ""
    for path in files:
        report = parse_junit(path.read_text())
        specs += report.specs
        seconds += report.seconds
        focus, skip = focus or report.focus, skip or report.skip
    return Report(tuple(specs), seconds, files, focus, skip)


def selected(report: Report, focus: str | None = None, skip: str | None = None) -> list[Spec]:
    """The specs asked for: those that ran or were skipped at run time, those that never
    started and match the focus (``focus``, else the report's), and any suite node that
    failed. With ``focus`` or ``skip`` given, whether a spec that never started was
    selected ("not run") or filtered out is decided by them instead of the report's."""
    focus = report.focus if focus is None else focus
    skip = report.skip if skip is None else skip
    rows = []
    for spec in report.specs:
        if spec.suite_node:
            if spec.result == FAILED:
                rows.append(spec)
        elif not spec.filtered:
            rows.append(spec)
        elif focus and re.search(focus, spec.name):
            if (focus, skip) != (report.focus, report.skip):
                spec = replace(spec, not_run=_selects(focus, skip, f"{spec.suite} {spec.name}"))
            rows.append(spec)
    return rows


def counts(specs: Iterable[Spec]) -> dict[str, int]:
    found = {PASSED: 0, FAILED: 0, SKIPPED: 0, NOT_RUN: 0}
    for spec in specs:
        found[spec.result] += 1
        found[NOT_RUN] += spec.not_run
    return found


def summary(label: str, report: Report, specs: Sequence[Spec]) -> str:
    """One line: the counts and the suite's time."""
    n = counts(specs)
    total = sum(1 for s in specs if not s.suite_node)
    head = f"{label}: " if label else ""
    not_run = f" ({n[NOT_RUN]} of them not run)" if n[NOT_RUN] else ""
    return (
        f"{head}{n[PASSED]} passed, {n[FAILED]} failed, {n[SKIPPED]} skipped{not_run}"
        f" of {total} specs in {report.seconds:.0f} s"
    )


def _cell(spec: Spec | None) -> tuple[str, str]:
    if spec is None:
        return "not run", ""
    result = spec.result
    if spec.result == FAILED and spec.status != FAILED:
        result += f" ({spec.status})"  # timedout, panicked, interrupted, aborted
    elif spec.result == SKIPPED and spec.detail:
        result += f" ({spec.detail})"
    elif spec.not_run:
        result += " (not run)"
    elif spec.result == SKIPPED and spec.filtered:
        result += " (filtered out)"
    elif spec.status == "pending":
        result += " (pending)"
    seconds = f"{spec.seconds:.1f}" if spec.result != SKIPPED else ""
    return result, seconds


def table(columns: Sequence[tuple[str, Sequence[Spec]]], markdown: bool = False) -> str:
    """One row per spec name (in the order first seen), a result and a seconds column per
    labelled selection."""
    names: dict[str, None] = {}
    by_label: list[dict[str, Spec]] = []
    for _, specs in columns:
        names.update((s.name, None) for s in specs)
        by_label.append({s.name: s for s in specs})
    header = ["spec"]
    for label, _ in columns:
        suffix = f" ({label})" if label and len(columns) > 1 else ""
        header += [f"result{suffix}", f"seconds{suffix}"]
    rows = [header]
    for name in names:
        row = [name]
        for found in by_label:
            row += _cell(found.get(name))
        rows.append(row)
    if markdown:
        escaped = [[cell.replace("|", "\\|") for cell in row] for row in rows]
        lines = ["| " + " | ".join(row) + " |" for row in escaped]
        align = ["---"] + ["---", "---:"] * len(columns)
        lines.insert(1, "| " + " | ".join(align) + " |")
        return "\n".join(lines) + "\n"
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    out = []
    for row in rows:
        cells = [
            cell.rjust(width) if title.startswith("seconds") else cell.ljust(width)
            for cell, width, title in zip(row, widths, header, strict=True)
        ]
        out.append("  ".join(cells).rstrip())
    return "\n".join(out) + "\n"


def _labelled(arg: str) -> tuple[str, Path]:
    label, sep, path = arg.partition("=")
    if sep and label and "/" not in label:
        return label, Path(path)
    return "", Path(arg)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="+", metavar="[LABEL=]DIR", help="e2e.test's --report-dir")
    parser.add_argument("--focus", help="the run's focus, if not the report's")
    parser.add_argument("--skip", help="the run's skip pattern, if not the report's")
    parser.add_argument("--markdown", type=Path, metavar="FILE", help="write the table here too")
    args = parser.parse_args(argv)

    columns: list[tuple[str, Sequence[Spec]]] = []
    lines: list[str] = []
    failed = empty = False
    for arg in args.dirs:
        label, directory = _labelled(arg)
        report = read_dir(directory)
        specs = selected(report, args.focus, args.skip)
        if not report.files:
            lines.append(f"{label or directory}: no JUnit report (junit*.xml) in {directory}")
            empty = True
            continue
        columns.append((label, specs))
        lines.append(summary(label, report, specs))
        failed |= any(s.result == FAILED or s.not_run for s in specs)
        empty |= not any(s.result == PASSED for s in specs)
    if columns:
        sys.stdout.write(table(columns))
        if args.markdown:
            args.markdown.write_text(table(columns, markdown=True))
        for label, listed in columns:
            for spec in listed:
                if spec.result == FAILED:
                    head = f"{label}: " if label else ""
                    print(f"{head}FAILED ({spec.status}): {spec.name}: {spec.detail}")
    print("\n".join(lines))
    return 1 if failed else 2 if empty else 0


if __name__ == "__main__":
    sys.exit(main())
