"""hack/upstream_report.py: the per-spec table of e2e.test's JUnit report. Pure: files."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "hack"))
import upstream_report as ur

# As ginkgo v2.21 writes it for e2e.test (OmitFailureMessageAttr, OmitSpecLabels, the
# leaf node type kept), abridged: the run's filters, the suite's own nodes, the specs that
# ran, one skipped at run time, one the skip pattern filtered out, one the focus left out,
# and one selected that never ran (the suite timed out first).
JUNIT = r"""<?xml version="1.0" encoding="UTF-8"?>
  <testsuites tests="8" disabled="3" errors="0" failures="2" time="301.5">
      <testsuite name="Kubernetes e2e suite" package="/x" tests="8" disabled="0" skipped="3"
          errors="0" failures="2" time="301.5" timestamp="2026-12-01T10:00:00">
          <properties>
              <property name="SuiteSucceeded" value="false"></property>
              <property name="FocusStrings" value="\[sig-apps\] Job "></property>
              <property name="SkipStrings" value="\[Serial\],\[Slow\]"></property>
          </properties>
          <testcase name="[SynchronizedBeforeSuite]" classname="Kubernetes e2e suite"
              status="passed" time="0.4"></testcase>
          <testcase
  name="[It] [sig-apps] Job should run a job to completion when tasks succeed [Conformance]"
              classname="Kubernetes e2e suite" status="passed" time="12.25"></testcase>
          <testcase name="[It] [sig-apps] Job should fail to exceed backoffLimit [Conformance]"
              classname="Kubernetes e2e suite" status="failed" time="900.1">
              <failure message="" type="failed">[FAILED] Timed out after 900s.
ensuring job reach the backoff limit
In [It] at: job.go:1234</failure>
          </testcase>
          <testcase name="[It] [sig-apps] Job should delete pods when suspended"
              classname="Kubernetes e2e suite" status="timedout" time="60">
              <failure message="" type="timedout">

  [TIMEDOUT] A suite timeout occurred</failure>
          </testcase>
          <testcase name="[It] [sig-apps] Job should run on a node with some label"
              classname="Kubernetes e2e suite" status="skipped" time="0.01">
              <skipped message="skipped - Requires at least 2 nodes (not 1)"></skipped>
          </testcase>
          <testcase name="[It] [sig-apps] Job should keep going [Serial]"
              classname="Kubernetes e2e suite" status="skipped" time="0">
              <skipped message="skipped"></skipped>
          </testcase>
          <testcase name="[It] [sig-storage] CSI Volumes should mount"
              classname="Kubernetes e2e suite" status="skipped" time="0">
              <skipped message="skipped"></skipped>
          </testcase>
          <testcase name="[It] [sig-apps] Job should apply changes to a job status"
              classname="Kubernetes e2e suite" status="skipped" time="0">
              <skipped message="skipped"></skipped>
          </testcase>
      </testsuite>
  </testsuites>
"""

FOCUS = r"\[sig-apps\] Job "
# The same report as an older or another tool writes it: no filters recorded.
WITHOUT_FILTERS = re.sub(r"<properties>.*?</properties>", "", JUNIT, flags=re.S)


def test_parse_reads_every_testcase() -> None:
    report = ur.parse_junit(JUNIT)
    assert report.seconds == 301.5
    assert [(s.name, s.result, s.status, s.seconds) for s in report.specs] == [
        ("[SynchronizedBeforeSuite]", "passed", "passed", 0.4),
        (
            "[sig-apps] Job should run a job to completion when tasks succeed [Conformance]",
            "passed",
            "passed",
            12.25,
        ),
        (
            "[sig-apps] Job should fail to exceed backoffLimit [Conformance]",
            "failed",
            "failed",
            900.1,
        ),
        ("[sig-apps] Job should delete pods when suspended", "failed", "timedout", 60.0),
        ("[sig-apps] Job should run on a node with some label", "skipped", "skipped", 0.01),
        ("[sig-apps] Job should keep going [Serial]", "skipped", "skipped", 0.0),
        ("[sig-storage] CSI Volumes should mount", "skipped", "skipped", 0.0),
        ("[sig-apps] Job should apply changes to a job status", "skipped", "skipped", 0.0),
    ]
    assert (report.focus, report.skip) == (r"\[sig-apps\] Job ", r"\[Serial\]|\[Slow\]")
    specs = {s.name: s for s in report.specs}
    assert specs["[SynchronizedBeforeSuite]"].suite_node
    failed = specs["[sig-apps] Job should fail to exceed backoffLimit [Conformance]"]
    assert failed.detail == "[FAILED] Timed out after 900s."
    timed_out = specs["[sig-apps] Job should delete pods when suspended"]
    assert timed_out.detail == "[TIMEDOUT] A suite timeout occurred"
    runtime_skip = specs["[sig-apps] Job should run on a node with some label"]
    assert (runtime_skip.detail, runtime_skip.filtered) == (
        "Requires at least 2 nodes (not 1)",
        False,
    )
    serial = specs["[sig-apps] Job should keep going [Serial]"]
    assert (serial.filtered, serial.not_run) == (True, False)
    never_ran = specs["[sig-apps] Job should apply changes to a job status"]
    assert (never_ran.filtered, never_ran.not_run) == (True, True)


def test_a_bare_testsuite_and_missing_status_attributes_are_read() -> None:
    """Older ginkgo (and other tools) write no status attribute, or one <testsuite>."""
    text = (
        '<testsuite time="3"><testcase name="a" time="1"/>'
        '<testcase name="b" time="2"><failure message="boom">x</failure></testcase>'
        '<testcase name="c"><error message="">panic: nil</error></testcase>'
        '<testcase name="d"><skipped message="skipped - why"/></testcase></testsuite>'
    )
    report = ur.parse_junit(text)
    assert [(s.name, s.result, s.detail) for s in report.specs] == [
        ("a", "passed", ""),
        ("b", "failed", "boom"),
        ("c", "failed", "panic: nil"),
        ("d", "skipped", "why"),
    ]


def test_selected_lists_what_ran_was_skipped_at_run_time_or_matches_the_focus() -> None:
    ran = [
        "[sig-apps] Job should run a job to completion when tasks succeed [Conformance]",
        "[sig-apps] Job should fail to exceed backoffLimit [Conformance]",
        "[sig-apps] Job should delete pods when suspended",
        "[sig-apps] Job should run on a node with some label",
    ]
    rows = ur.selected(ur.parse_junit(JUNIT))
    assert [s.name for s in rows] == [
        *ran,
        "[sig-apps] Job should keep going [Serial]",
        "[sig-apps] Job should apply changes to a job status",
    ]
    assert [s.not_run for s in rows] == [False] * 5 + [True]
    # Without the filters in the report, only what started; --focus brings the rest back.
    bare = ur.parse_junit(WITHOUT_FILTERS)
    assert [s.name for s in ur.selected(bare)] == ran
    given = ur.selected(bare, FOCUS, r"\[Serial\]")
    assert [(s.name, s.not_run) for s in given[4:]] == [
        ("[sig-apps] Job should keep going [Serial]", False),
        ("[sig-apps] Job should apply changes to a job status", True),
    ]
    # A focus of our own decides what was selected, the report's skip pattern kept.
    assert [s.not_run for s in ur.selected(ur.parse_junit(JUNIT), r"Job ")][4:] == [False, True]


def test_a_failed_suite_node_is_listed() -> None:
    text = JUNIT.replace(
        'name="[SynchronizedBeforeSuite]" classname="Kubernetes e2e suite"\n'
        '              status="passed" time="0.4"></testcase>',
        'name="[SynchronizedBeforeSuite]" status="failed" time="0.4">'
        "<failure>[FAILED] no schedulable nodes</failure></testcase>",
    )
    [node] = [s for s in ur.selected(ur.parse_junit(text)) if s.suite_node]
    assert (node.name, node.result, node.detail) == (
        "[SynchronizedBeforeSuite]",
        "failed",
        "[FAILED] no schedulable nodes",
    )


def test_summary_counts_the_selected_specs() -> None:
    report = ur.parse_junit(JUNIT)
    line = ur.summary("builtin", report, ur.selected(report))
    assert line == "builtin: 1 passed, 2 failed, 3 skipped (1 of them not run) of 6 specs in 302 s"
    bare = ur.parse_junit(WITHOUT_FILTERS)
    assert ur.summary("", bare, ur.selected(bare)) == (
        "1 passed, 2 failed, 1 skipped of 4 specs in 302 s"
    )


def test_table_text_and_markdown() -> None:
    specs = ur.selected(ur.parse_junit(JUNIT))
    lines = ur.table([("", specs)]).splitlines()
    assert lines[0].split() == ["spec", "result", "seconds"]
    assert re.search(r"\[Conformance\]  +passed +12\.2$", lines[1]), lines[1]
    assert "failed (timedout)" in lines[3]
    assert "skipped (Requires at least 2 nodes (not 1))" in lines[4]
    assert lines[5].endswith("skipped (filtered out)")
    assert lines[6].endswith("skipped (not run)")
    md = ur.table([("", specs)], markdown=True).splitlines()
    assert md[0] == "| spec | result | seconds |"
    assert md[1] == "| --- | --- | ---: |"
    assert md[2] == (
        "| [sig-apps] Job should run a job to completion when tasks succeed [Conformance]"
        " | passed | 12.2 |"
    )
    assert md[6] == "| [sig-apps] Job should keep going [Serial] | skipped (filtered out) |  |"


def test_two_labelled_columns_side_by_side() -> None:
    builtin = ur.selected(ur.parse_junit(JUNIT))
    operator = [s for s in builtin if "backoffLimit" in s.name]
    md = ur.table([("builtin", builtin), ("operator", operator)], markdown=True).splitlines()
    assert md[0] == (
        "| spec | result (builtin) | seconds (builtin) | result (operator) | seconds (operator) |"
    )
    assert md[2].endswith("| passed | 12.2 | not run |  |")
    assert md[3].endswith("| failed | 900.1 | failed | 900.1 |")


def _write(directory: Path, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "junit_01.xml").write_text(text)
    return directory


def test_main_exits_1_on_a_failed_spec_and_writes_the_markdown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = _write(tmp_path / "r", JUNIT)
    md = tmp_path / "specs.md"
    status = ur.main(["--markdown", str(md), str(report)])
    out = capsys.readouterr().out
    assert status == 1
    assert out.splitlines()[-1] == (
        "1 passed, 2 failed, 3 skipped (1 of them not run) of 6 specs in 302 s"
    )
    assert (
        "FAILED (timedout): [sig-apps] Job should delete pods when suspended: "
        "[TIMEDOUT] A suite timeout occurred"
    ) in out
    assert md.read_text().startswith("| spec | result | seconds |\n")


def _passing(text: str) -> str:
    text = re.sub(r'status="(failed|timedout)"', 'status="passed"', text)
    return re.sub(r"<failure.*?</failure>", "", text, flags=re.S)


def test_main_exits_1_when_a_selected_spec_did_not_run(tmp_path: Path) -> None:
    assert ur.main([str(_write(tmp_path / "r", _passing(JUNIT)))]) == 1


def test_main_exits_0_when_every_selected_spec_passed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = _write(tmp_path / "r", _passing(WITHOUT_FILTERS))
    assert ur.main([f"builtin={report}"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "builtin: 3 passed, 0 failed, 1 skipped of 4 specs in 302 s"
    )


def test_main_exits_2_without_a_report_or_without_a_spec_that_ran(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty").mkdir()
    assert ur.main([str(tmp_path / "empty")]) == 2
    assert "no JUnit report" in capsys.readouterr().out
    nothing = _write(tmp_path / "none", '<testsuites><testsuite time="1"/></testsuites>')
    assert ur.main([str(nothing)]) == 2
