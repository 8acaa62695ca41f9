"""`vulcan validate` as a user runs it: a real subprocess of the installed command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.helpers import REPO, volcano_fixture_files


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vulcan", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )


def test_every_volcano_fixture_validates() -> None:
    files = [str(p) for p in volcano_fixture_files()]
    result = run("validate", *files)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""
    assert "0 problem(s)" in result.stderr


def test_shipped_examples_validate() -> None:
    files = [str(p) for p in sorted((REPO / "examples").glob("*.yaml"))]
    assert files
    result = run("validate", *files)
    assert result.returncode == 0, result.stdout + result.stderr


BROKEN = """\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: train}
spec:
  minAvailable: 2
  tasks:
    - name: worker
      replicas: 2
      minAvailable: 3
      template: {spec: {containers: [{name: c, image: busybox}]}}
    - name: worker
      replicas: 1
      template: {spec: {containers: [{name: c, image: busybox}]}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: research}
spec: {weight: -3}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: fine}
spec: {weight: 2}
"""


def test_problems_print_file_kind_name_field_reason(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(BROKEN)
    result = run("validate", str(path))
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines == [
        f"{path}: Job/train: spec.tasks[0].minAvailable: 'minAvailable' is greater than "
        "'replicas' in task: worker, job: train",
        f"{path}: Job/train: spec.tasks[1].name: duplicated task name worker",
        f"{path}: Queue/research: spec.weight: Invalid value: -3: should be greater than or "
        "equal to 0",
    ]
    # Unknown kinds are skipped, not errors.
    assert "Deployment/web: skipped" in result.stderr


def test_stdin_and_valid_exit_code() -> None:
    ok = "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: a}\n"
    result = run("validate", "-", stdin=ok)
    assert result.returncode == 0, result.stdout
    bad = ok + "spec: {weight: 0, capability: {cpu: 1KiB}}\n"
    result = run("validate", "-", stdin=bad)
    assert result.returncode == 1
    assert result.stdout.strip() == (
        '<stdin>: Queue/a: spec.capability[cpu]: invalid quantity "1KiB": unknown suffix "KiB" '
        '(suffixes are case-sensitive; did you mean "Ki"?)'
    )


def test_only_unknown_kinds_is_success() -> None:
    result = run("validate", "-", stdin="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
    assert result.returncode == 0
    assert "ConfigMap/c: skipped" in result.stderr


def test_unreadable_file_and_bad_yaml_are_problems(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    result = run("validate", str(missing))
    assert result.returncode == 1
    assert result.stdout.startswith(f"{missing}: cannot read")
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Job\n  metadata: [unclosed\n")
    result = run("validate", str(bad))
    assert result.returncode == 1
    assert result.stdout.startswith(f"{bad}: invalid YAML")


def test_crds_command_prints_all_nine(tmp_path: Path) -> None:
    result = run("crds", "--out", str(tmp_path))
    assert result.returncode == 0
    assert len(list(tmp_path.glob("*.yaml"))) == 9
    for generated in tmp_path.glob("*.yaml"):
        assert generated.read_text() == (REPO / "manifests" / "crds" / generated.name).read_text()


def test_version_and_help() -> None:
    assert run("--version").stdout.startswith("vulcan ")
    assert run().returncode == 2


def _one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_binary_junk_is_one_line_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.yaml"
    junk.write_bytes(bytes(range(256)) * 4)
    line = _one_line_error(run("validate", str(junk)))
    assert line == f"{junk}: cannot read: not UTF-8 text (byte 0x80 at offset 128)"
    control = tmp_path / "control.yaml"
    control.write_bytes(b"kind: Job\x00\x01\x02\n")
    line = _one_line_error(run("validate", str(control)))
    assert line.startswith(f"{control}: invalid YAML: ")


def test_missing_api_version_or_kind_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "noversion.yaml"
    path.write_text("kind: Job\nmetadata: {name: train}\nspec: {}\n")
    result = run("validate", str(path))
    assert _one_line_error(result) == f"{path}: Job/train: apiVersion: Required value"
    assert "skipped" not in result.stderr
    path.write_text("apiVersion: batch.volcano.sh/v1alpha1\nmetadata: {name: train}\n")
    assert _one_line_error(run("validate", str(path))) == (
        f"{path}: <no kind>/train: kind: Required value"
    )


def test_empty_file_and_directory_are_errors(tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert _one_line_error(run("validate", str(empty))) == (
        f"{empty}: no objects (the file is empty)"
    )
    comments = tmp_path / "comments.yaml"
    comments.write_text("# nothing\n---\n")
    assert _one_line_error(run("validate", str(comments))).endswith(
        "no objects (the file is empty)"
    )
    assert _one_line_error(run("validate", str(tmp_path))) == (
        f"{tmp_path}: cannot read: is a directory (name the YAML files in it)"
    )
    assert (
        _one_line_error(run("validate", "-", stdin="")) == "<stdin>: no objects (the file is empty)"
    )


def test_allowed_values_print_as_kubernetes_does() -> None:
    job = """\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: train}
spec:
  policies: [{event: Nope, action: RestartJob}]
  tasks:
    - name: worker
      replicas: 1
      template: {spec: {containers: [{name: c, image: busybox}]}}
"""
    result = run("validate", "-", stdin=job)
    assert result.returncode == 1
    assert "[" not in result.stdout.split("supported values:")[1], result.stdout
    assert 'invalid policy event; supported values: "*", "PodFailed", ' in result.stdout
    queue = "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: q}\n"
    result = run("validate", "-", stdin=queue + "spec: {dequeueStrategy: random}\n")
    assert result.returncode == 1
    assert result.stdout == (
        '<stdin>: Queue/q: spec.dequeueStrategy: Unsupported value: "random": '
        'supported values: "fifo", "traverse"\n'
    )


def test_controllers_help_describes_every_controller_it_runs() -> None:
    result = run("controllers", "--help")
    assert result.returncode == 0
    # argparse wraps at hyphens ("queue-\ncontroller"): join those back.
    text = " ".join(result.stdout.split()).replace("- ", "-")
    for name in (
        "job-controller",
        "cronjob-controller",
        "jobflow-controller",
        "jobtemplate-controller",
        "pg-controller",
        "queue-controller",
        "hypernode-controller",
    ):
        assert name + " " in text, name
    for word in (
        "Jobs",
        "JobFlows",
        "JobTemplates",
        "PodGroups",
        "Commands",
        "queues",
        "HyperNodes",
    ):
        assert word in text, word


BROKEN_CRONJOB = """\
apiVersion: batch.volcano.sh/v1alpha1
kind: CronJob
metadata:
  name: nightly
spec:
  schedule: "CRON_TZ=Asia/Tokyo 0 3 * * *"
  timeZone: Local
  jobTemplate:
    spec:
      tasks:
      - replicas: 1
        minAvailable: 2
        template: {spec: {containers: [{name: c, image: busybox}]}}
"""


def test_a_broken_cronjob_is_refused_with_kubernetes_messages(tmp_path: Path) -> None:
    path = tmp_path / "cron.yaml"
    path.write_text(BROKEN_CRONJOB)
    result = run("validate", str(path))
    assert result.returncode == 1
    schedule = 'spec.schedule: Invalid value: "CRON_TZ=Asia/Tokyo 0 3 * * *"'
    assert result.stdout.splitlines() == [
        f"{path}: CronJob/nightly: {schedule}: cannot use TZ or CRON_TZ in schedule, use "
        "timeZone field instead",
        f'{path}: CronJob/nightly: spec.timeZone: Invalid value: "Local": timeZone must be an '
        "explicit time zone as defined in https://www.iana.org/time-zones",
        f"{path}: CronJob/nightly: spec.jobTemplate.spec.tasks[0].minAvailable: 'minAvailable' "
        "is greater than 'replicas' in task: default0, job: nightly-99999999",
        f"{path}: CronJob/nightly: spec.jobTemplate.spec.minAvailable: job 'minAvailable' "
        "should not be greater than total replicas in tasks",
    ]
