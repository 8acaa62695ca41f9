"""vcctl's command line: Volcano's flags and defaults, the legacy binaries' reversed -n/-N,
one-line failures with the right exit codes, and the default namespace from the kubeconfig."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from vcctl import cli, legacy
from vcctl.kube import Target, default_namespace
from vcctl.legacy import vjobs_parser, vqueues_parser, vsub_parser


def parse(*argv: str) -> argparse.Namespace:
    return cli.build_parser().parse_args(list(argv))


def test_job_run_defaults_are_volcanos() -> None:
    args = parse("job", "run", "-N", "train")
    assert args.name == "train"
    assert args.image == "busybox"
    assert args.min == 1
    assert args.replicas == 1
    assert args.requests == "cpu=1000m,memory=100Mi"
    assert args.limits == "cpu=1000m,memory=100Mi"
    assert args.scheduler == "volcano"
    assert args.filename == ""
    assert args.namespace is None  # resolved from the kubeconfig when the command runs
    assert args.master == "" and args.kubeconfig == ""


def test_job_run_short_and_long_flags() -> None:
    args = parse(
        "job", "run", "-N", "a", "-n", "ns", "-i", "img", "-m", "2", "-r", "3",
        "-R", "cpu=2", "-L", "cpu=4", "-S", "other", "-s", "http://x:1", "-k", "/kc",
    )  # fmt: skip
    assert (args.namespace, args.image, args.min, args.replicas) == ("ns", "img", 2, 3)
    assert (args.requests, args.limits, args.scheduler) == ("cpu=2", "cpu=4", "other")
    assert (args.master, args.kubeconfig) == ("http://x:1", "/kc")
    long = parse("job", "run", "--name", "a", "--namespace", "ns", "--filename", "j.yaml")
    assert (long.name, long.namespace, long.filename) == ("a", "ns", "j.yaml")


def test_job_list_flags() -> None:
    args = parse("job", "list")
    assert (args.queue, args.scheduler, args.selector, args.all_namespaces) == ("", "", "", False)
    args = parse("job", "list", "-q", "q", "-S", "s", "--selector", "tr", "--all-namespaces")
    assert (args.queue, args.scheduler, args.selector, args.all_namespaces) == (
        "q",
        "s",
        "tr",
        True,
    )


@pytest.mark.parametrize("verb", ["view", "suspend", "resume", "delete"])
def test_job_name_verbs_take_capital_n_for_the_name(verb: str) -> None:
    args = parse("job", verb, "-N", "j", "-n", "team")
    assert (args.name, args.namespace) == ("j", "team")


def test_queue_defaults() -> None:
    create = parse("queue", "create")
    assert (create.name, create.weight, create.state) == ("test", 1, "Open")
    operate = parse("queue", "operate", "-n", "q", "-a", "update", "-w", "4")
    assert (operate.name, operate.action, operate.weight) == ("q", "update", 4)
    assert parse("queue", "operate", "-n", "q", "-a", "open").weight == 0
    assert parse("queue", "get", "-n", "q").name == "q"
    assert parse("queue", "delete", "-n", "q").name == "q"


def test_flow_flags() -> None:
    create = parse("jobflow", "create", "-f", "flow.yaml")
    assert create.file == "flow.yaml"
    assert parse("jobtemplate", "create", "--file", "t.yaml").file == "t.yaml"
    describe = parse("jobflow", "describe", "-N", "f", "-n", "ns")
    assert (describe.name, describe.namespace, describe.format) == ("f", "ns", "yaml")
    assert parse("jobflow", "list", "--all-namespaces").all_namespaces
    # Volcano lists JobTemplates of one namespace only.
    with pytest.raises(cli.UsageError):
        parse("jobtemplate", "list", "--all-namespaces")
    delete = parse("jobtemplate", "delete", "-f", "t.yaml")
    assert (delete.file, delete.name) == ("t.yaml", "")


def test_pod_list_flags() -> None:
    args = parse("pod", "list", "-j", "job", "-q", "queue", "--all-namespaces")
    assert (args.job, args.queue, args.all_namespaces) == ("job", "queue", True)


def test_legacy_binaries_reverse_name_and_namespace() -> None:
    args = vjobs_parser().parse_args(["-n", "job", "-N", "team"])
    assert (args.name, args.namespace) == ("job", "team")
    for make in (legacy.vsub_parser,):
        args = make().parse_args(["-n", "job", "-N", "team", "-c", "sleep 1"])
        assert (args.name, args.namespace, args.command) == ("job", "team", "sleep 1")
    assert vqueues_parser().parse_args(["-n", "q"]).name == "q"


def test_vsub_defaults_come_from_volcanos_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    args = vsub_parser().parse_args(["-n", "j"])
    assert (args.image, args.scheduler, args.namespace) == ("busybox", "volcano", None)
    monkeypatch.setenv("VOLCANO_DEFAULT_IMAGE", "alpine")
    monkeypatch.setenv("VOLCANO_SCHEDULER_NAME", "vc2")
    monkeypatch.setenv("VOLCANO_DEFAULT_JOB_NAMESPACE", "batch")
    args = vsub_parser().parse_args(["-n", "j"])
    assert (args.image, args.scheduler, args.namespace) == ("alpine", "vc2", "batch")
    # The flags still win over the environment.
    args = vsub_parser().parse_args(["-n", "j", "-i", "x", "-S", "y", "-N", "z"])
    assert (args.image, args.scheduler, args.namespace) == ("x", "y", "z")


# ------------------------------------------------------------------ failures and exit codes


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["job", "run"], "vcctl: job name cannot be left blank"),
        (["job", "view"], "vcctl: job name (specified by --name or -N) is mandatory"),
        (["job", "delete"], "vcctl: job name is mandatory to delete a particular job"),
        (["job", "suspend"], "vcctl: job name is mandatory to suspend a particular job"),
        (["job", "resume"], "vcctl: job name is mandatory to resume a particular job"),
        (["queue", "delete"], "vcctl: queue name must be specified"),
        (["queue", "get"], "vcctl: name is mandatory to get the particular queue details"),
        (["queue", "operate", "-n", "q"], "vcctl: action can not be null"),
        (["queue", "operate", "-n", "q", "-a", "update"], "weight must be specified"),
        (["queue", "operate", "-n", "q", "-a", "drop"], "action drop invalid"),
        (["queue", "create", "-S", "Draining"], "invalid queue state 'Draining'"),
        (["jobflow", "get"], "name is mandatory to get the particular jobflow details"),
        (["jobtemplate", "delete"], "vcctl: job template name must be specified"),
        (["jobflow", "describe", "-o", "xml"], "unsupported format 'xml'"),
    ],
)
def test_a_bad_command_fails_in_one_line_before_connecting(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # -s names a port nothing listens on: the checks fail before any connection is tried.
    assert cli.main([*argv, "-s", "http://127.0.0.1:9"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(message[:40]) or message in err
    assert err.count("\n") == 1


def test_a_usage_error_is_one_line_with_exit_code_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["job", "list", "-m", "2"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert "unrecognized arguments: -m 2" in err
    assert cli.main(["job", "run", "-N", "j", "-r", "many"]) == 2
    err = capsys.readouterr().err
    assert "argument -r/--replicas: invalid int value: 'many'" in err and err.count("\n") == 1


def test_an_unreachable_server_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["job", "list", "-s", "http://127.0.0.1:9"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("vcctl: cannot reach the API server at http://127.0.0.1:9: ")
    assert err.count("\n") == 1


def test_no_command_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 0
    assert "job" in capsys.readouterr().out
    assert cli.main(["queue"]) == 0
    out = capsys.readouterr().out
    assert "operate" in out and "create" in out


def test_version_needs_no_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["version"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "API Version: v1alpha1"
    assert lines[1].startswith("Version: ")
    assert [line.split(":")[0] for line in lines[2:4]] == ["Git SHA", "Built At"]


def test_the_console_scripts_are_installed() -> None:
    scripts = Path(sys.executable).parent
    for name in ("vcctl", "vsub", "vjobs", "vqueues", "vcancel", "vsuspend", "vresume"):
        assert (scripts / name).exists(), f"{name} is not installed (reinstall: pip install -e .)"
    result = subprocess.run(
        [str(scripts / "vcancel")], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 1
    assert result.stderr == "vcancel: job name is mandatory to cancel a particular job\n"


# ---------------------------------------------------------------------- default namespace


def kubeconfig(path: Path, namespace: str | None, current: str = "ctx") -> Path:
    context = {"cluster": "c", "user": "u"} | ({"namespace": namespace} if namespace else {})
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"current-context: {current}\n"
        f"contexts:\n- name: ctx\n  context: {context}\n"
        "clusters:\n- name: c\n  cluster: {server: 'http://127.0.0.1:9'}\n"
        "users:\n- name: u\n  user: {}\n"
    )
    return path


def test_the_namespace_defaults_to_the_kubeconfig_contexts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    team = kubeconfig(tmp_path / "team", "team-a")
    plain = kubeconfig(tmp_path / "plain", None)
    assert default_namespace(Target(kubeconfig=str(team))) == "team-a"
    assert default_namespace(Target(kubeconfig=str(plain))) == "default"
    # $KUBECONFIG is a path list, the first file naming a current context wins.
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'missing'}:{team}:{plain}")
    assert default_namespace(Target()) == "team-a"
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("POD_NAMESPACE", "in-cluster")
    assert default_namespace(Target()) == "in-cluster"
