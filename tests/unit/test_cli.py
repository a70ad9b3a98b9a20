"""The command line and the settings (cli.py, config.py), and the pod a job builds."""

from __future__ import annotations

import urllib.parse
from typing import Any

import pytest

from paralleljob import constants as c
from paralleljob.cli import StartupError, check_kubernetes_version, liveness_endpoint, parse_args
from paralleljob.config import OperatorConfig
from paralleljob.core.job.kind import PARALLELJOB
from paralleljob.core.job.pods import build_pod

JOB: dict[str, Any] = {
    "apiVersion": "paralleljob.dev/v1alpha1",
    "kind": "ParallelJob",
    "metadata": {"name": "multi-task-job", "namespace": "ns", "uid": "u-1", "resourceVersion": "5"},
    "spec": {
        "template": {
            "metadata": {"labels": {"app": "x"}, "annotations": {"a": "b"}, "finalizers": ["f/x"]},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]},
        }
    },
}


def test_pod_is_named_labelled_owned_and_finalized_like_a_job_pod() -> None:
    pod = build_pod(JOB, PARALLELJOB)
    meta = pod["metadata"]
    assert meta["generateName"] == "multi-task-job-"
    assert meta["namespace"] == "ns"
    assert meta["labels"] == {
        "app": "x",
        c.LABEL_JOB_NAME: "multi-task-job",
        c.LABEL_CONTROLLER_UID: "u-1",
    }
    assert meta["annotations"] == {"a": "b"}
    assert meta["finalizers"] == ["f/x", c.TRACKING_FINALIZER]
    [owner] = meta["ownerReferences"]
    assert owner == {
        "apiVersion": "paralleljob.dev/v1alpha1",
        "kind": "ParallelJob",
        "name": "multi-task-job",
        "uid": "u-1",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert pod["spec"] == JOB["spec"]["template"]["spec"]
    pod["spec"]["containers"].append({})
    assert len(JOB["spec"]["template"]["spec"]["containers"]) == 1, "the template is copied"


def test_generate_name_prefix_is_cut_to_58_characters() -> None:
    job = {**JOB, "metadata": {**JOB["metadata"], "name": "j" * 63}}
    assert len(build_pod(job, PARALLELJOB)["metadata"]["generateName"]) == 58


@pytest.mark.parametrize(
    ("argv", "env", "namespaces", "level", "port"),
    [
        ([], {}, (), "info", 8080),
        (["-n", "a", "--namespace", "b", "-n", "a"], {}, ("a", "b"), "info", 8080),
        ([], {"PJ_WATCH_NAMESPACES": "x, y,,"}, ("x", "y"), "info", 8080),
        (["--namespace", "z"], {"PJ_WATCH_NAMESPACES": "x"}, ("z",), "info", 8080),
        (["--log-level", "DEBUG", "--liveness-port", "9"], {}, (), "debug", 9),
        ([], {"PJ_LOG_LEVEL": "warning", "PJ_LIVENESS_PORT": "0"}, (), "warning", 0),
    ],
)
def test_cli_options_and_environment(
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    env: dict[str, str],
    namespaces: tuple[str, ...],
    level: str,
    port: int,
) -> None:
    for key in ("PJ_WATCH_NAMESPACES", "PJ_LOG_LEVEL", "PJ_LIVENESS_PORT"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    config = parse_args(argv)
    assert (config.namespaces, config.log_level, config.liveness_port) == (namespaces, level, port)


def test_cli_tuning_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PJ_POD_BACKOFF_BASE_SECONDS", "0.5")
    monkeypatch.setenv("PJ_SYNC_BATCH_SECONDS", "0")
    config = parse_args([])
    assert config.controller.core.backoff_base_seconds == 0.5
    assert config.controller.core.backoff_max_seconds == 600
    assert config.controller.sync_batch_seconds == 0


@pytest.mark.parametrize("argv", [["--log-level", "loud"], ["--liveness-port", "x"]])
def test_cli_rejects_bad_options(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args(argv)
    assert exc.value.code == 2


@pytest.mark.parametrize(
    ("argv", "env", "mode"),
    [
        ([], {}, "managed-by"),
        ([], {"PJ_MANAGE_JOBS": "All"}, "all"),
        (["--manage-jobs", "off"], {"PJ_MANAGE_JOBS": "all"}, "off"),
    ],
)
def test_which_jobs_to_manage_comes_from_the_flag_else_the_environment(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], env: dict[str, str], mode: str
) -> None:
    monkeypatch.delenv("PJ_MANAGE_JOBS", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert parse_args(argv).manage_jobs == mode


@pytest.mark.parametrize(
    ("argv", "env", "name"),
    [
        (["--manage-jobs", "some"], {}, "--manage-jobs"),
        ([], {"PJ_MANAGE_JOBS": "some"}, "PJ_MANAGE_JOBS"),
    ],
)
def test_an_unknown_manage_jobs_setting_is_refused_with_its_values(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    env: dict[str, str],
    name: str,
) -> None:
    monkeypatch.delenv("PJ_MANAGE_JOBS", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(SystemExit) as exc:
        parse_args(argv)
    assert exc.value.code == 2
    assert f"{name} must be one of off, managed-by, all, not 'some'" in capsys.readouterr().err


def test_cli_rejects_bad_tuning(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PJ_POD_BACKOFF_BASE_SECONDS", "soon")
    with pytest.raises(SystemExit):
        parse_args([])
    assert "PJ_POD_BACKOFF_BASE_SECONDS must be a number of seconds" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("name", "raw", "message"),
    [
        ("PJ_POD_BACKOFF_BASE_SECONDS", "-1", "must be at least 0, got '-1'"),
        ("PJ_POD_BACKOFF_MAX_SECONDS", "x", "must be a number of seconds, got 'x'"),
        ("PJ_SYNC_BATCH_SECONDS", "-0.5", "must be at least 0, got '-0.5'"),
        ("PJ_LIVENESS_STALL_SECONDS", "0.5", "must be at least 1, got '0.5'"),
        ("PJ_KUEUE_WAIT_FOR_PODS_READY", "yes", "must be true or false, got 'yes'"),
        ("PJ_API_CONCURRENCY", "0", "must be at least 1, got '0'"),
        ("PJ_API_CONCURRENCY", "1.5", "must be an integer, got '1.5'"),
        ("PJ_API_QPS", "-1", "must be at least 0, got '-1'"),
        ("PJ_API_BURST", "0", "must be at least 1, got '0'"),
        ("PJ_API_BURST", "1.5", "must be an integer, got '1.5'"),
        ("PJ_DURATION_REFRESH_QPS", "fast", "must be a number of seconds, got 'fast'"),
        ("PJ_PROGRESS_WRITE_QPS", "-2", "must be at least 0, got '-2'"),
        ("PJ_METRICS_PORT", "http", "must be an integer, got 'http'"),
    ],
)
def test_each_tuning_knob_is_checked_with_its_name(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
    raw: str,
    message: str,
) -> None:
    monkeypatch.setenv(name, raw)
    with pytest.raises(SystemExit):
        parse_args([])
    assert f"{name} {message}" in capsys.readouterr().err


def test_tuning_knobs_keep_their_types_and_blank_means_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PJ_API_CONCURRENCY", " 8 ")
    monkeypatch.setenv("PJ_LIVENESS_STALL_SECONDS", "90")
    monkeypatch.setenv("PJ_SYNC_BATCH_SECONDS", "  ")
    monkeypatch.setenv("PJ_KUEUE_WAIT_FOR_PODS_READY", " True ")
    config = parse_args([])
    assert config.controller.kueue_wait_for_pods_ready is True
    assert config.api.concurrency == 8 and isinstance(config.api.concurrency, int)
    assert config.controller.stall_seconds == 90.0
    assert isinstance(config.controller.stall_seconds, float)
    assert config.controller.sync_batch_seconds == 0.1


def test_api_rate_limit_and_duration_budget_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    config = parse_args([])
    assert (config.api.qps, config.api.burst) == (0.0, 1), "unlimited by default"
    assert config.controller.duration_refresh_qps == 5.0
    assert config.controller.progress_write_qps == 10.0
    assert config.metrics_port == 8081
    monkeypatch.setenv("PJ_API_QPS", "20")
    monkeypatch.setenv("PJ_DURATION_REFRESH_QPS", "0")
    monkeypatch.setenv("PJ_PROGRESS_WRITE_QPS", "0")
    config = parse_args(["--metrics-port", "0"])
    assert (config.api.qps, config.api.burst) == (20.0, 20), "burst defaults to the QPS"
    assert config.controller.duration_refresh_qps == 0.0
    assert config.controller.progress_write_qps == 0.0
    assert config.metrics_port == 0
    monkeypatch.setenv("PJ_API_BURST", "30")
    assert parse_args([]).api.burst == 30


def test_ports_come_from_the_flag_else_the_environment_else_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert (parse_args([]).liveness_port, parse_args([]).metrics_port) == (8080, 8081)
    monkeypatch.setenv("PJ_METRICS_PORT", "9100")
    monkeypatch.setenv("PJ_LIVENESS_PORT", "0")
    config = parse_args([])
    assert (config.liveness_port, config.metrics_port) == (0, 9100)
    assert parse_args(["--metrics-port", "9200"]).metrics_port == 9200


def test_the_bind_address_comes_from_the_flag_else_the_environment_else_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PJ_BIND_ADDRESS", raising=False)
    assert parse_args([]).bind_address == "0.0.0.0"
    monkeypatch.setenv("PJ_BIND_ADDRESS", " ")
    assert parse_args([]).bind_address == "0.0.0.0", "blank: the default"
    monkeypatch.setenv("PJ_BIND_ADDRESS", " 127.0.0.1 ")
    assert parse_args([]).bind_address == "127.0.0.1"
    assert parse_args(["--bind-address", "::0"]).bind_address == "::", "normalised"
    assert parse_args(["--bind-address=10.1.2.3"]).bind_address == "10.1.2.3"


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        ([], "localhost", "PJ_BIND_ADDRESS must be an IP address, got 'localhost'"),
        ([], "0.0.0.0:8080", "PJ_BIND_ADDRESS must be an IP address, got '0.0.0.0:8080'"),
        (
            ["--bind-address", "256.0.0.1"],
            "",
            "--bind-address must be an IP address, got '256.0.0.1'",
        ),
        (["--bind-address", ""], "127.0.0.1", "--bind-address must be an IP address, got ''"),
    ],
)
def test_a_bad_bind_address_is_one_line_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    env: str,
    message: str,
) -> None:
    monkeypatch.setenv("PJ_BIND_ADDRESS", env)
    with pytest.raises(SystemExit) as exc:
        parse_args(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("address", "url", "host"),
    [
        ("0.0.0.0", "http://0.0.0.0:8080/healthz", "0.0.0.0"),
        ("127.0.0.1", "http://127.0.0.1:8080/healthz", "127.0.0.1"),
        ("::", "http://[::]:8080/healthz", "::"),
        ("::1", "http://[::1]:8080/healthz", "::1"),
    ],
)
def test_kopf_listens_for_the_probe_on_the_bind_address(address: str, url: str, host: str) -> None:
    endpoint = liveness_endpoint(OperatorConfig(bind_address=address, liveness_port=8080))
    assert endpoint == url
    # kopf's health reporter listens on the URL's host and port.
    parts = urllib.parse.urlsplit(endpoint)
    assert (parts.hostname, parts.port, parts.path) == (host, 8080, "/healthz")
    assert liveness_endpoint(OperatorConfig(bind_address=address, liveness_port=0)) is None


@pytest.mark.parametrize(
    ("version", "refused"),
    [
        ({"major": "1", "minor": "34", "gitVersion": "v1.34.4"}, True),
        ({"major": "1", "minor": "35", "gitVersion": "v1.35.0"}, False),
        ({"major": "1", "minor": "37", "gitVersion": "v1.37.2"}, False),
        ({"major": "1", "minor": "33+", "gitVersion": "v1.33.5-eks-1"}, True),
        ({"major": "1", "minor": "36+"}, False),
        # An API server that does not say is not refused.
        ({"major": "", "minor": ""}, False),
        ({}, False),
    ],
)
def test_an_api_server_older_than_the_oldest_supported_minor_is_refused(
    version: dict[str, str], refused: bool
) -> None:
    if not refused:
        check_kubernetes_version(version)
        return
    with pytest.raises(StartupError) as err:
        check_kubernetes_version(version)
    assert str(err.value).endswith("the operator needs 1.35 or later (docs/operations.md)")
    assert str(err.value).startswith(f"the API server runs Kubernetes {version['gitVersion']}")
