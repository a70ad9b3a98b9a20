"""The operator under an election (standby.py): its settings and start-up check, the
campaign (stand by, lead, exit), a standby's /healthz and /metrics, and the manifests
that run two replicas."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from pathlib import Path
from typing import Any, cast

import aiohttp
import pytest
import yaml

from paralleljob import config as config_module
from paralleljob.cli import StartupError, _check_lease, parse_args
from paralleljob.config import LeaderElectionConfig, OperatorConfig, own_identity, own_namespace
from paralleljob.election.standby import campaign, serve_standby
from paralleljob.runtime.api import ApiError
from paralleljob.runtime.kube import Kube
from tests.unit.jobs.support import (
    FakeClock,
    FakeLeaseServer,
    FakeLock,
    attempt,
    candidate,
    free_port,
)

REPO = Path(__file__).resolve().parents[3]
ENV = (
    "PJ_LEADER_ELECT",
    "PJ_LEADER_ELECTION_NAMESPACE",
    "PJ_LEADER_ELECTION_LEASE_NAME",
    "PJ_LEADER_ELECTION_LEASE_DURATION_SECONDS",
    "PJ_LEADER_ELECTION_RENEW_DEADLINE_SECONDS",
    "PJ_LEADER_ELECTION_RETRY_PERIOD_SECONDS",
    "POD_NAME",
    "POD_NAMESPACE",
)


@pytest.fixture(autouse=True)
def no_pod(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Not in a pod: no downward-API variables, no service account namespace file."""
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    missing = tmp_path / "serviceaccount" / "namespace"
    monkeypatch.setattr(config_module, "SERVICE_ACCOUNT_NAMESPACE_FILE", missing)
    return missing


# -- settings ----------------------------------------------------------------------------


def test_defaults_fail_over_in_under_15_seconds() -> None:
    election = parse_args([]).leader_election
    assert election.enabled is True
    assert (election.namespace, election.lease_name) == (
        "paralleljob-system",
        "paralleljob-operator",
    )
    assert (
        election.lease_duration_seconds,
        election.renew_deadline_seconds,
        election.retry_period_seconds,
    ) == (9, 6.0, 1.0)
    assert election.identity == f"{socket.gethostname()}_{os.getpid()}"
    assert election == LeaderElectionConfig(identity=election.identity)


def test_in_a_pod_the_identity_is_the_pods_name_and_the_lease_in_its_namespace(
    monkeypatch: pytest.MonkeyPatch, no_pod: Path
) -> None:
    no_pod.parent.mkdir()
    no_pod.write_text("from-service-account\n")
    assert parse_args([]).leader_election.namespace == "from-service-account"
    monkeypatch.setenv("POD_NAME", "paralleljob-operator-7d9f-abcde")
    monkeypatch.setenv("POD_NAMESPACE", "ops")
    election = parse_args([]).leader_election
    assert (election.identity, election.namespace) == ("paralleljob-operator-7d9f-abcde", "ops")
    monkeypatch.setenv("PJ_LEADER_ELECTION_NAMESPACE", "elsewhere")
    monkeypatch.setenv("PJ_LEADER_ELECTION_LEASE_NAME", "pj-leader")
    election = parse_args([]).leader_election
    assert (election.namespace, election.lease_name) == ("elsewhere", "pj-leader")


@pytest.mark.parametrize(
    ("environ", "expected"),
    [({}, "host_42"), ({"POD_NAME": " "}, "host_42"), ({"POD_NAME": "pod-a"}, "pod-a")],
)
def test_own_identity(environ: dict[str, str], expected: str) -> None:
    assert own_identity(environ, "host", 42) == expected


@pytest.mark.parametrize(
    ("environ", "account", "expected"),
    [
        ({}, None, ""),
        ({}, "sa-ns\n", "sa-ns"),
        ({"POD_NAMESPACE": "pod-ns"}, "sa-ns", "pod-ns"),
        ({"POD_NAMESPACE": ""}, "sa-ns", "sa-ns"),
    ],
)
def test_own_namespace(environ: dict[str, str], account: str | None, expected: str) -> None:
    assert own_namespace(environ, account) == expected


@pytest.mark.parametrize(
    ("raw", "enabled"),
    [("false", False), ("0", False), ("OFF", False), ("no", False), ("true", True), ("", True)],
)
def test_leader_elect_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, raw: str, enabled: bool
) -> None:
    monkeypatch.setenv("PJ_LEADER_ELECT", raw)
    assert parse_args([]).leader_election.enabled is enabled


def test_the_flag_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PJ_LEADER_ELECT", "true")
    assert parse_args(["--no-leader-elect"]).leader_election.enabled is False
    monkeypatch.setenv("PJ_LEADER_ELECT", "false")
    assert parse_args(["--leader-elect"]).leader_election.enabled is True


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"PJ_LEADER_ELECT": "maybe"}, "PJ_LEADER_ELECT must be true or false, got 'maybe'"),
        (
            {"PJ_LEADER_ELECTION_LEASE_DURATION_SECONDS": "1.5"},
            "PJ_LEADER_ELECTION_LEASE_DURATION_SECONDS must be an integer, got '1.5'",
        ),
        (
            {"PJ_LEADER_ELECTION_RETRY_PERIOD_SECONDS": "0"},
            "PJ_LEADER_ELECTION_RETRY_PERIOD_SECONDS must be at least 0.1, got '0'",
        ),
        (
            {"PJ_LEADER_ELECTION_LEASE_DURATION_SECONDS": "6"},
            "PJ_LEADER_ELECTION_LEASE_DURATION_SECONDS (6) must be greater than "
            "PJ_LEADER_ELECTION_RENEW_DEADLINE_SECONDS (6)",
        ),
        (
            {"PJ_LEADER_ELECTION_RETRY_PERIOD_SECONDS": "5"},
            "PJ_LEADER_ELECTION_RENEW_DEADLINE_SECONDS (6) must be greater than 1.2 x "
            "PJ_LEADER_ELECTION_RETRY_PERIOD_SECONDS (5)",
        ),
    ],
)
def test_bad_election_settings_are_one_line_naming_them(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    env: dict[str, str],
    message: str,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as exc:
        parse_args([])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_shorter_timings_for_tests_are_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PJ_LEADER_ELECTION_LEASE_DURATION_SECONDS", "4")
    monkeypatch.setenv("PJ_LEADER_ELECTION_RENEW_DEADLINE_SECONDS", "3")
    monkeypatch.setenv("PJ_LEADER_ELECTION_RETRY_PERIOD_SECONDS", "1")
    election = parse_args([]).leader_election
    assert (election.lease_duration_seconds, election.renew_deadline_seconds) == (4, 3.0)
    assert election.retry_period_seconds == 1.0


class FakeKube:
    """Answers the start-up check's GETs: path -> the ApiError to raise (else 200)."""

    def __init__(self, errors: dict[str, ApiError]) -> None:
        self.errors = errors
        self.paths: list[str] = []

    async def request(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        assert method == "GET"
        self.paths.append(path)
        if path in self.errors:
            raise self.errors[path]
        return {}


NS_PATH = "/api/v1/namespaces/paralleljob-system"
LEASE_PATH = (
    "/apis/coordination.k8s.io/v1/namespaces/paralleljob-system/leases/paralleljob-operator"
)


def _check(errors: dict[str, ApiError]) -> list[str]:
    kube = FakeKube(errors)
    asyncio.run(_check_lease(cast(Kube, kube), LeaderElectionConfig(identity="x")))
    return kube.paths


def test_the_start_up_check_reads_the_lease_namespace_and_lease() -> None:
    assert _check({}) == [NS_PATH, LEASE_PATH]
    assert _check({LEASE_PATH: ApiError(404, "NotFound", "not found")}) == [NS_PATH, LEASE_PATH]


@pytest.mark.parametrize(
    ("errors", "message"),
    [
        (
            {NS_PATH: ApiError(404, "NotFound", "namespaces not found")},
            "namespace 'paralleljob-system' of the leader-election lease does not exist "
            "(set PJ_LEADER_ELECTION_NAMESPACE, or PJ_LEADER_ELECT=false to run alone)",
        ),
        (
            {LEASE_PATH: ApiError(403, "Forbidden", "cannot get resource leases")},
            "cannot read lease paralleljob-system/paralleljob-operator: "
            "403 Forbidden: cannot get resource leases",
        ),
    ],
)
def test_the_start_up_check_fails_in_one_line(errors: dict[str, ApiError], message: str) -> None:
    with pytest.raises(StartupError) as exc:
        _check(errors)
    assert str(exc.value) == message


# -- the campaign: stand by, lead, exit ---------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.events: list[str] = []

    async def ports_freed(self) -> None:
        self.events.append("ports freed")

    def exit_now(self) -> None:
        self.events.append("exit")


def test_campaign_leads_once_elected_and_releases_when_the_operator_stops(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    server, clock = FakeLeaseServer(), FakeClock()
    a, _ = candidate("pod-a", server, clock)
    seen = Recorder()

    async def lead(stop: asyncio.Event) -> None:
        seen.events.append(f"leading (holder {server.record.holder if server.record else ''})")

    status = asyncio.run(
        campaign(
            a,
            lead,
            stop=asyncio.Event(),
            before_leading=seen.ports_freed,
            exit_now=seen.exit_now,
        )
    )
    assert status == 0
    assert seen.events == ["ports freed", "leading (holder pod-a)"]
    assert server.record is not None and server.record.holder == "", "released"
    assert f"acquired lease {FakeLock.describe} as pod-a" in caplog.text
    assert f"released lease {FakeLock.describe}" in caplog.text


def test_campaign_exits_when_the_lease_is_lost(caplog: pytest.LogCaptureFixture) -> None:
    server, clock = FakeLeaseServer(), FakeClock()
    a, lock = candidate("pod-a", server, clock)
    seen = Recorder()

    async def lead(stop: asyncio.Event) -> None:
        seen.events.append("leading")
        lock.down = True
        try:
            await asyncio.Event().wait()  # the operator runs until it is stopped
        except asyncio.CancelledError:
            seen.events.append("operator cancelled")
            raise

    status = asyncio.run(
        campaign(
            a, lead, stop=asyncio.Event(), before_leading=seen.ports_freed, exit_now=seen.exit_now
        )
    )
    assert status == 1
    assert seen.events == ["ports freed", "leading", "exit", "operator cancelled"]
    lost = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert lost == [
        f"lost lease {FakeLock.describe}: not renewed within 10s "
        "(0 Unreachable: ClientConnectorError: connection refused); exiting"
    ]


def test_campaign_stopped_while_standing_by_never_leads() -> None:
    server, clock = FakeLeaseServer(), FakeClock()
    a, _ = candidate("pod-a", server, clock)
    b, _ = candidate("pod-b", server, clock)
    assert attempt(a)
    seen = Recorder()

    async def lead(stop: asyncio.Event) -> None:
        seen.events.append("leading")

    async def scenario() -> int:
        stop = asyncio.Event()
        stop.set()  # SIGTERM before the lease was ever free
        return await campaign(
            b, lead, stop=stop, before_leading=seen.ports_freed, exit_now=seen.exit_now
        )

    assert asyncio.run(scenario()) == 0
    assert seen.events == ["ports freed"]
    assert server.record is not None and server.record.holder == "pod-a"


def test_a_standby_answers_healthz_and_metrics_then_frees_the_ports() -> None:
    liveness, metrics_port = free_port(), free_port()
    config = OperatorConfig(
        bind_address="127.0.0.1", liveness_port=liveness, metrics_port=metrics_port
    )

    async def scenario() -> tuple[int, Any, int]:
        status = {"lease": "ns/name", "leading": False, "holder": "pod-a"}
        runners = await serve_standby(config, lambda: status)
        try:
            # On the bind address only (--bind-address), not on every interface.
            assert [runner.addresses for runner in runners] == [
                [("127.0.0.1", liveness)],
                [("127.0.0.1", metrics_port)],
            ]
            async with aiohttp.ClientSession() as session:
                async with session.get(f"http://127.0.0.1:{liveness}/healthz") as r:
                    health = (r.status, await r.json())
                async with session.get(f"http://127.0.0.1:{metrics_port}/metrics") as r:
                    scraped = r.status
        finally:
            for runner in runners:
                await runner.cleanup()
        return health[0], health[1], scraped

    code, body, scraped = asyncio.run(scenario())
    assert (code, scraped) == (200, 200)
    assert body == {"standby": {"lease": "ns/name", "leading": False, "holder": "pod-a"}}
    for port in (liveness, metrics_port):  # free for kopf and the operator's metrics
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio's servers
            sock.bind((config.bind_address, port))


# -- the manifests (tests/deploy checks them on a cluster) --------------------------------


def _manifests() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted((REPO / "manifests").glob("*.yaml")):
        if path.name != "kustomization.yaml":
            docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def _one(kind: str) -> dict[str, Any]:
    [found] = [d for d in _manifests() if d["kind"] == kind]
    return found


def test_the_deployment_runs_two_replicas_apart_with_their_pod_names() -> None:
    deployment = _one("Deployment")
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    pod = spec["template"]["spec"]
    [container] = pod["containers"]
    env = {
        e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        for e in container["env"]
    }
    assert env["POD_NAME"] == "metadata.name"
    assert env["POD_NAMESPACE"] == "metadata.namespace"
    # Not in config.env: no deploy's configuration turns the election off.
    assert {"name": "PJ_LEADER_ELECT", "value": "true"} in container["env"]
    assert "PJ_LEADER_ELECT" not in (REPO / "manifests" / "config.env").read_text()
    [preferred] = pod["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    term = preferred["podAffinityTerm"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"] == spec["selector"]["matchLabels"]
    [zones] = pod["topologySpreadConstraints"]
    assert (zones["topologyKey"], zones["whenUnsatisfiable"], zones["maxSkew"]) == (
        "topology.kubernetes.io/zone",
        "ScheduleAnyway",
        1,
    )
    assert zones["labelSelector"]["matchLabels"] == spec["selector"]["matchLabels"]


def test_a_disruption_budget_keeps_one_replica() -> None:
    budget = _one("PodDisruptionBudget")
    assert budget["spec"]["minAvailable"] == 1
    deployment = _one("Deployment")
    assert (
        budget["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    )
    assert budget["metadata"]["namespace"] == deployment["metadata"]["namespace"]


def test_the_lease_role_grants_exactly_what_leases_and_fences_need() -> None:
    role = _one("Role")
    assert role["metadata"]["namespace"] == "paralleljob-system"
    assert role["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["get", "create", "update"],
        },
        {
            "apiGroups": ["paralleljob.dev"],
            "resources": ["fences"],
            "verbs": ["get", "create", "update", "delete"],
        },
    ]
    binding = _one("RoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": "paralleljob-operator",
            "namespace": "paralleljob-system",
        }
    ]
