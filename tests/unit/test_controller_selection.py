"""`vulcan controllers --controllers` (Volcano's `*,-name` syntax) and the controllers' flags."""

from __future__ import annotations

import argparse

import pytest

from core.controller.flags import LEASE_NAME
from core.controller.selection import (
    PODGROUP,
    QUEUE,
    SelectionError,
    is_enabled,
    select_controllers,
)
from core.kube.leader import add_leader_election_flags
from podgroup_controller.flags import scheduler_names
from vulcan.cli import build_parser
from vulcan.controllers import add_controllers_flags

AVAILABLE = (PODGROUP, QUEUE)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("*", [PODGROUP, QUEUE]),
        ("*,-sharding-controller", [PODGROUP, QUEUE]),  # Volcano's default value works as is
        ("*,-queue-controller", [PODGROUP]),
        ("-queue-controller,*", [PODGROUP]),
        (" * , -pg-controller ", [QUEUE]),
        ("queue-controller", [QUEUE]),
        ("pg-controller,queue-controller", [PODGROUP, QUEUE]),
        ("-pg-controller", []),
        ("-job-controller,*", [PODGROUP, QUEUE]),  # disabling one we lack is fine
    ],
)
def test_selection(text: str, expected: list[str]) -> None:
    assert select_controllers(text, AVAILABLE) == expected


def test_first_item_naming_a_controller_decides() -> None:
    assert is_enabled("a", ["a", "-a"], ())
    assert not is_enabled("a", ["-a", "a", "*"], ())
    assert not is_enabled("x", ["*"], {"x"})  # off by default: * does not enable it
    assert is_enabled("x", ["*", "x"], {"x"})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("podgroup", "unknown controller 'podgroup'"),
        ("*,-nope", "unknown controller 'nope'"),
        ("", "empty"),
        ("*,,queue-controller", "empty item"),
        ("job-controller", "job-controller not available in this build"),
    ],
)
def test_selection_errors(text: str, message: str) -> None:
    with pytest.raises(SelectionError, match=message):
        select_controllers(text, AVAILABLE)


def test_bad_selection_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["controllers", "--controllers", "*,-podgroups"])
    assert exit_.value.code == 2
    assert "unknown controller 'podgroups'" in capsys.readouterr().err


def test_scheduler_names_repeat_and_comma() -> None:
    parser = argparse.ArgumentParser()
    add_controllers_flags(parser)
    assert scheduler_names(parser.parse_args([])) == ("volcano",)
    args = parser.parse_args(
        ["--scheduler-name", "volcano,default-scheduler", "--scheduler-name", "batch,volcano"]
    )
    assert scheduler_names(args) == ("volcano", "default-scheduler", "batch")


def test_defaults() -> None:
    args = build_parser().parse_args(["controllers"])
    assert args.controllers == "*"
    assert args.port == 8081 and args.bind_address == "0.0.0.0"
    assert args.inherit_owner_annotations is True
    assert args.max_requeue_num == 15 and args.worker_threads_for_podgroup == 5
    assert build_parser().parse_args(["controllers", "--inherit-owner-annotations=false"])


def test_leader_flags_match_the_shared_definition() -> None:
    """The controllers take the shared leader-election flags, with their own Lease name."""
    ours = argparse.ArgumentParser()
    add_controllers_flags(ours)
    shared = argparse.ArgumentParser()
    add_leader_election_flags(shared, default_name=LEASE_NAME)
    leader_dests = {a.dest for a in shared._actions if a.dest.startswith("leader_elect")}
    assert leader_dests <= {a.dest for a in ours._actions}
    argv = [
        "--leader-elect=false",
        "--leader-elect-lease-duration=30s",
        "--leader-elect-renew-deadline=1m",
        "--leader-elect-retry-period=500ms",
        "--leader-elect-resource-namespace=kube-system",
    ]
    for args in ([], argv):
        mine = vars(ours.parse_known_args(args)[0])
        theirs = vars(shared.parse_args(args))
        assert {k: mine[k] for k in leader_dests} == theirs
