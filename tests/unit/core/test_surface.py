"""The core's exported surface: ``paralleljob.core`` names what the shell uses, each
name resolves to the object of the module that defines it, and importing any core
module first works (no import cycle through the package)."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import paralleljob.core as core

PACKAGE = Path(core.__file__).resolve().parent.parent

SURFACE = {
    # One sync's three steps and their values (sync.py).
    "sync_context",
    "plan_pods",
    "track",
    "count_and_enact",
    "SyncInput",
    "SyncContext",
    "PodPlan",
    "PodOutcome",
    "Tracked",
    "SyncResult",
    "Event",
    # A value type evolved, cheaper than dataclasses.replace (dataclass_evolve.py).
    "evolve",
    # The job and its pods as values, parsed and written back (model.py).
    "Job",
    "JobSpec",
    "JobStatus",
    "PodInfo",
    "Condition",
    "INDEXED_COMPLETION",
    "NON_INDEXED_COMPLETION",
    "POD_REPLACEMENT_FAILED",
    "parse_job",
    "parse_spec",
    "parse_status",
    "parse_pod",
    "spec_defaults_patch",
    "status_to_dict",
    # A pod condition as JSON (podStartDeadlineSeconds' PodPlan.fail_condition).
    "condition_to_dict",
    "is_finished",
    # spec.managedBy (managed_by.py).
    "managed_by_external_controller",
    # The pods a plan creates (pods.py).
    "build_pod",
    "job_template",
    "new_pod_bodies",
    # The kinds of job (kind.py): ParallelJob, batch/v1 Job, which a pod is of.
    "JobKind",
    "PARALLELJOB",
    "batch_job",
    "kind_of_pod",
    "WATCH_LABEL",
    # What the caches watch: the kinds a configuration runs, a job's pod, the paths.
    "job_kinds",
    "is_jobs_pod",
    "jobs_path",
    "pods_path",
    # The retry delays the shell's back-off shares (backoff.py).
    "delay_seconds",
    # The ordered intervals the metrics read (intervals.py).
    "intervals_total",
    "parse_indexes_from_string",
    # Leader election's decisions on a Lease, which the elector asks (lease.py).
    "LeaseRecord",
    "Observation",
    "observe",
    "lease_valid",
    "is_leader",
    "held_by_another",
    "claim",
    "released",
    "retry_delay",
    "yield_window",
    "leaves_it_to_a_standby",
    "record_of",
    "spec_of",
    # A ParallelCronJob's sync (cron_sync.py) and its values as JSON (cron_model.py).
    "plan_cron_sync",
    "record_created",
    "CronPlan",
    "ChildJob",
    "CRON_KIND",
    "CRON_PLURAL",
    "INVALID_SCHEDULE_REASONS",
    "build_job",
    "child_job",
    "cron_input",
    "cron_owner_uid",
    "cron_status_to_dict",
    "cron_path",
    "candidate_jobs",
    "version_number",
    "controlled_by",
    "schedule_conditions",
    # A queued ParallelJob's Workload sync (workload_sync.py), its actions, and the
    # values and paths of Kueue's objects it reads (podsets.py, workload_model.py).
    "plan_workload_sync",
    "PRIORITY_MISSING",
    "KueueInput",
    "Action",
    "CreateWorkload",
    "DeleteWorkload",
    "PatchJob",
    "PatchWorkloadStatus",
    "RemoveFinalizer",
    "UpdateWorkload",
    "QueuedJob",
    "parse_queued_job",
    "Priority",
    "PRIORITY_CLASS_LABEL",
    "QUEUE_LABEL",
    "Workload",
    "parse_workload",
    "ResourceFlavor",
    "parse_resource_flavor",
    "KUEUE_API_VERSION",
    "POD_PRIORITY_CLASS",
    "WORKLOAD_PRIORITY_CLASS",
    "RESOURCE_IN_USE_FINALIZER",
    "RESOURCE_FLAVOR_PLURAL",
    "WORKLOAD_PLURAL",
    "WORKLOAD_PRIORITY_CLASS_PLURAL",
    "kueue_path",
}


#: Every core module, by its name under paralleljob.core ("job.sync", "lease", ...).
CORE_MODULES = sorted(
    ".".join(p.relative_to(PACKAGE / "core").with_suffix("").parts)
    for p in (PACKAGE / "core").rglob("*.py")
    if p.stem != "__init__"
)


def test_all_is_the_surface() -> None:
    assert set(core.__all__) == SURFACE
    assert len(core.__all__) == len(SURFACE), "no name twice"


@pytest.mark.parametrize("name", sorted(SURFACE))
def test_a_name_resolves_to_its_module_s_object(name: str) -> None:
    value = getattr(core, name)
    home = getattr(value, "__module__", None)
    if home is not None and home.startswith("paralleljob.core."):
        assert getattr(importlib.import_module(home), name) is value
    else:
        # A constant (no __module__) or a name of another package: some core module
        # must hold that very object under that name.
        holders = [
            module
            for module in CORE_MODULES
            if getattr(importlib.import_module(f"paralleljob.core.{module}"), name, None) is value
        ]
        assert holders, f"{name} is in no core module"


def _core_names_imported_by(path: Path) -> set[str]:
    """The names ``path`` imports from paralleljob.core or one of its modules."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            module = node.module
            if module == "core" or module.startswith(("core.", "paralleljob.core")):
                names.update(alias.name for alias in node.names)
    return names


def test_the_shell_uses_only_the_surface() -> None:
    """Every name the shell's packages and handlers.py import from the core is exported."""
    shell = ("runtime", "election", "jobs", "cron")
    users = [*sorted(p for d in shell for p in (PACKAGE / d).glob("*.py")), PACKAGE / "handlers.py"]
    used = set().union(*(_core_names_imported_by(path) for path in users))
    assert "sync_context" in used, "the check reads the shell's imports"
    assert used <= SURFACE


@pytest.mark.parametrize("module", CORE_MODULES)
def test_any_core_module_imports_first(module: str) -> None:
    """A fresh interpreter that imports this module first (the package's __init__ then
    imports the others) meets no cycle."""
    code = f"import paralleljob.core.{module}"
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=60)
