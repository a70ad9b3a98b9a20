"""Fixtures for the operator's end-to-end tests: the CRD, and the operator itself run
as a real subprocess (the ``paralleljob-operator`` console script) watching the test's
namespace, so that tests can SIGKILL it."""

from __future__ import annotations

import functools
import json
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pluggy
import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from prometheus_client.parser import text_string_to_metric_families

from tests.support.wait import wait_until

from .support import Kubectl, api_client, assert_quiet, expected_warnings, kubectl

REPO_ROOT = Path(__file__).resolve().parents[2]
CRD = REPO_ROOT / "crds" / "paralleljob.dev_paralleljobs.yaml"
CRON_CRD = REPO_ROOT / "crds" / "paralleljob.dev_parallelcronjobs.yaml"
#: The template rule a CRD rule cannot afford (crds/template-policy.yaml).
TEMPLATE_POLICY = REPO_ROOT / "crds" / "template-policy.yaml"
#: Where a leader names itself (election/fence_object.py); no policy judges by it here.
FENCE_CRD = REPO_ROOT / "crds" / "paralleljob.dev_fences.yaml"
OPERATOR_BIN = Path(sys.executable).parent / "paralleljob-operator"


def apply_crd() -> None:
    """Applies the ParallelJob, ParallelCronJob and Fence CRDs and the template policy from
    crds/ (server-side, so that repeated runs agree) and waits until the CRDs are
    Established."""
    files = (CRD, CRON_CRD, FENCE_CRD, TEMPLATE_POLICY)
    kubectl("apply", "--server-side", "--force-conflicts", *(f"-f{f}" for f in files))

    # Polled, not `kubectl wait`: when another test worker has just created the CRD, its
    # status has no conditions yet, which `kubectl wait` reports as an error.
    def established() -> bool:
        got = kubectl(
            "get",
            "crd/paralleljobs.paralleljob.dev",
            "crd/parallelcronjobs.paralleljob.dev",
            "crd/fences.paralleljob.dev",
            "-o",
            "jsonpath={.items[*].status.conditions[?(@.type=='Established')].status}",
            check=False,
        )
        return got.stdout.split() == ["True", "True", "True"]

    wait_until(established, timeout=60, what="the CRDs Established")


@pytest.fixture
def namespace(namespace: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """tests/conftest.py's fresh namespace, then, before it is deleted, its Warning
    Events judged: a test whose body passed fails on one whose reason it did not declare
    with ``@pytest.mark.warnings("Reason", ...)`` (a happy path is quiet). The fixtures
    built on the namespace (the operator's, with its cleanup of the test's jobs) are torn
    down first, so what the cleanup causes counts too."""
    yield namespace
    report = getattr(request.node, "rep_call", None)
    # A body that failed, was skipped or xfailed has said what went wrong; a Warning
    # reported on top would only bury that.
    if report is not None and report.passed:
        assert_quiet(namespace, expected_warnings(request.node))


#: What this process last applied of crds/: each object's (uid, generation) then.
_APPLIED: dict[str, tuple[str, int]] = {}


@functools.cache
def _crd_objects() -> tuple[tuple[str, str], ...]:
    """crds/' objects that apply_crd applies: (kind, name) each (read once: the CRDs'
    YAML takes a tenth of a second to parse)."""
    found = [
        ("CustomResourceDefinition", yaml.safe_load(path.read_text())["metadata"]["name"])
        for path in (CRD, CRON_CRD, FENCE_CRD)
    ]
    found += [
        (doc["kind"], doc["metadata"]["name"])
        for doc in yaml.safe_load_all(TEMPLATE_POLICY.read_text())
        if doc
    ]
    return tuple(found)


def _crds_as_applied() -> dict[str, tuple[str, int]] | None:
    """Each of crds/' objects' (uid, generation) as the API server holds them now; None
    when one is missing, or a CRD not Established."""
    api = api_client()
    readers = {
        "CustomResourceDefinition": client.ApiextensionsV1Api(api).read_custom_resource_definition,
        "ValidatingAdmissionPolicy": client.AdmissionregistrationV1Api(
            api
        ).read_validating_admission_policy,
        "ValidatingAdmissionPolicyBinding": client.AdmissionregistrationV1Api(
            api
        ).read_validating_admission_policy_binding,
    }
    reads = [
        (f"{kind}/{name}", lambda r=readers[kind], n=name: r(n, _preload_content=False))
        for kind, name in _crd_objects()
    ]
    found: dict[str, tuple[str, int]] = {}
    for key, read in reads:
        try:
            got = json.loads(read().data)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        conditions = (got.get("status") or {}).get("conditions") or []
        if got["kind"] == "CustomResourceDefinition" and not any(
            c["type"] == "Established" and c["status"] == "True" for c in conditions
        ):
            return None
        found[key] = (got["metadata"]["uid"], got["metadata"].get("generation", 0))
    return found


@pytest.fixture
def crd(kubeconfig: str) -> None:
    """The ParallelJob CRD (and crds/' other objects), applied unless what this process
    applied last is still there unchanged (same uid and generation: other tests of the
    session, make undeploy's, remove or replace them). Four reads instead of a server-side
    apply of the whole CRDs for every test: a tenth of the kubectl and much of the API
    server's CPU in make test's first pass."""
    if _APPLIED and _crds_as_applied() == _APPLIED:
        return
    apply_crd()
    _APPLIED.clear()
    _APPLIED.update(_crds_as_applied() or {})


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Operator:
    """The operator as a subprocess: start, SIGKILL, restart; its log on failure."""

    def __init__(
        self,
        namespace: str,
        log_dir: Path,
        env: dict[str, str],
        more_namespaces: tuple[str, ...] = (),
    ) -> None:
        self.namespace = namespace
        #: Watched besides ``namespace`` (each one more --namespace).
        self.more_namespaces = more_namespaces
        self.log_dir = log_dir
        # The kubernetes client writes a kubeconfig's embedded certificates to temp files
        # and deletes them at exit, which a SIGKILLed operator never reaches: its files
        # stay in the test's directory, not in /tmp.
        self.tmp_dir = log_dir / "tmp"  # made at start: log_dir may not exist yet
        self.env = {**env, "TMPDIR": str(self.tmp_dir)}
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.port = _free_port()
        self.metrics_port = _free_port()

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"operator-{self.starts}.log"

    def start(self) -> None:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.starts += 1
        self.port = _free_port()
        self.metrics_port = _free_port()
        while self.metrics_port == self.port:  # two free ports, not the same one twice
            self.metrics_port = _free_port()
        self.tmp_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [
                str(OPERATOR_BIN),
                *(f"--namespace={ns}" for ns in (self.namespace, *self.more_namespaces)),
                "--liveness-port",
                str(self.port),
                "--metrics-port",
                str(self.metrics_port),
                "--log-level",
                "debug",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env,
        )
        log.close()
        wait_until(self._healthy, timeout=60, what="the operator's /healthz")

    def _healthy(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"the operator exited ({self.proc.returncode}):\n{self.logs()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def health(self) -> tuple[int, Any]:
        """GET /healthz: the status code and the JSON (or text) it answered."""
        url = f"http://127.0.0.1:{self.port}/healthz"
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                return int(r.status), json.loads(r.read())
        except urllib.error.HTTPError as exc:
            return int(exc.code), exc.read().decode(errors="replace")

    def metrics(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        """GET /metrics: every sample, keyed by name and labels."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as r:
            text = r.read().decode()
        return {
            (s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }

    def kill(self) -> None:
        """SIGKILL: no cleanup of any kind happens in the operator."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def restart(self) -> None:
        self.kill()
        self.start()

    def freeze(self) -> None:
        """SIGSTOP: the process holds its connections but does nothing."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def logs(self) -> str:
        parts = []
        for i in range(1, self.starts + 1):
            path = self.log_dir / f"operator-{i}.log"
            if path.exists():
                parts.append(
                    f"--- operator run {i} ---\n{path.read_text(errors='replace')[-200000:]}"
                )
        return "\n".join(parts)


#: The Lease the operators elect on (the test's namespace holds it).
LEASE = "paralleljob-operator"


class Pair:
    """Two candidates, ``a`` and ``b`` (their pod names), for one Lease."""

    def __init__(self, namespace: str, log_dir: Path, **settings: str) -> None:
        self.ops = {
            name: Operator(namespace, log_dir / name, self._env(namespace, name, settings))
            for name in ("op-a", "op-b")
        }
        for op in self.ops.values():
            op.log_dir.mkdir()

    @staticmethod
    def _env(namespace: str, name: str, settings: dict[str, str]) -> dict[str, str]:
        return operator_env(
            PJ_LEADER_ELECT="true",
            PJ_LEADER_ELECTION_NAMESPACE=namespace,
            POD_NAME=name,
            **settings,
        )

    def leader(self, k: Kubectl) -> Operator | None:
        got = k.run("get", "lease", LEASE, "-o", "json", check=False)
        if got.returncode != 0:
            return None
        holder = json.loads(got.stdout)["spec"].get("holderIdentity")
        op = self.ops.get(holder or "")
        return op if op is not None and op.running else None

    def other(self, op: Operator) -> Operator:
        return next(o for o in self.ops.values() if o is not op)


def running_pair(pair: Pair, namespace: str) -> Iterator[Pair]:
    """A fixture's body: both candidates started; then the test's jobs cleaned up (a
    candidate a test left stopped resumed first) and both stopped."""
    for op in pair.ops.values():
        op.start()
    try:
        yield pair
    finally:
        for op in pair.ops.values():
            if op.running:
                op.thaw()
        running = [op for op in pair.ops.values() if op.running]
        try:
            if running:
                cleanup(running[0], namespace)
        finally:
            for op in pair.ops.values():
                op.stop()


@pytest.fixture
def pair(crd: None, namespace: str, tmp_path: Path) -> Iterator[Pair]:
    """Two operators electing a leader on a Lease in the test's namespace."""
    yield from running_pair(Pair(namespace, tmp_path), namespace)


def operator_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    # One operator per test, killed and restarted at will: no leader election (a restart
    # would wait for the killed one's lease); a test may turn it on in ``extra``.
    env["PJ_LEADER_ELECT"] = "false"
    env.update(extra)
    return env


@pytest.fixture
def operator_settings(request: pytest.FixtureRequest) -> dict[str, str]:
    """Environment for the operator; tests set it with indirect parametrisation."""
    return dict(getattr(request, "param", {}))


@pytest.fixture
def operator(
    request: pytest.FixtureRequest,
    crd: None,
    namespace: str,
    tmp_path: Path,
    operator_settings: dict[str, str],
) -> Iterator[Operator]:
    op = Operator(namespace, tmp_path, operator_env(**operator_settings))
    yield from running(op, namespace, request)


def running(op: Operator, namespace: str, request: pytest.FixtureRequest) -> Iterator[Operator]:
    """A fixture's body: ``op`` started, then the test's jobs cleaned up, ``op``
    stopped, and its log printed if the test failed."""
    op.start()
    try:
        yield op
    finally:
        failed = getattr(request.node, "rep_call", None)
        try:
            cleanup(op, namespace)
        finally:
            op.stop()
            if failed is not None and failed.failed:
                sys.stderr.write(op.logs())


def cleanup(op: Operator, namespace: str) -> None:
    """Deletes the test's jobs (ParallelJobs and Jobs) while the operator runs, so that
    no finalizer is left."""
    if not op.running:
        op.start()
    kubectl("delete", "pj", "--all", "-n", namespace, "--wait=false", check=False)
    kubectl("delete", "jobs", "--all", "-n", namespace, "--wait=false", check=False)

    def all_released() -> bool:
        jobs = json.loads(kubectl("get", "pj", "-n", namespace, "-o", "json").stdout)["items"]
        pods = json.loads(kubectl("get", "pods", "-n", namespace, "-o", "json").stdout)["items"]
        held = [
            p for p in pods if "paralleljob.dev/tracking" in (p["metadata"].get("finalizers") or [])
        ]
        return not jobs and not held

    wait_until(all_released, timeout=120, what=f"jobs deleted and pods released in {namespace}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[Any]
) -> Generator[None, pluggy.Result[pytest.TestReport], None]:
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.rep_call = report  # type: ignore[attr-defined]


@pytest.fixture
def k(namespace: str) -> Kubectl:
    return Kubectl(namespace)


# The work-queue fixtures (tests/e2e/workqueue.py), for test_workqueue.py and test_keda.py.
from .workqueue import queue, worker_image  # noqa: E402, F401
