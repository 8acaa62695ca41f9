"""plugins.framework.extension_points: a conf's plugins are checked when it is loaded: a method
that is no extension point (a misspelled hook) or a hook with the wrong parameters is refused,
naming the conf entry and the method, instead of never being called."""

from __future__ import annotations

from typing import Any

import pytest

from plugins.framework import registry
from plugins.framework.config import parse_scheduler_config
from plugins.framework.config_types import ConfigError
from plugins.framework.extension_points import PassState, SessionPlugin
from plugins.framework.registry import build_policy
from plugins.model.job_order import JobInput

CONF = 'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: priority\n  - name: mine\n'


def load(plugin: type, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setitem(registry.PLUGINS, "mine", plugin)
    return build_policy(parse_scheduler_config(CONF))


def test_a_misspelled_hook_is_refused_with_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    class Misspelled(SessionPlugin):
        name = "mine"

        def job_orderkey(self, job: JobInput, state: PassState) -> int:
            return 0

    with pytest.raises(ConfigError) as refused:
        load(Misspelled, monkeypatch)
    said = str(refused.value)
    assert said.startswith('tiers[0].plugins[1]: plugin "mine" defines job_orderkey()')
    assert "did you mean job_order_key?" in said


def test_a_hook_with_other_parameters_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    class Wrong(SessionPlugin):
        name = "mine"

        def job_order_key(self, job: JobInput) -> int:
            return 0

    with pytest.raises(ConfigError, match=r"defines job_order_key\(job\), but the extension point"):
        load(Wrong, monkeypatch)


def test_helpers_listed_and_private_methods_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    class Fine(SessionPlugin):
        name = "mine"
        helpers = ("weight_of",)

        def job_order_key(self, job: JobInput, state: PassState) -> int:
            return self.weight_of(job) + self._bonus()

        def weight_of(self, job: JobInput) -> int:
            return -job.priority

        def _bonus(self) -> int:
            return 0

    policy = load(Fine, monkeypatch)
    assert [type(p).__name__ for p in policy.plugins_for("job_order_key")] == [
        "PriorityPlugin",
        "Fine",
    ]


def test_every_builtin_plugin_passes_the_check() -> None:
    conf = "tiers:\n- plugins:\n" + "".join(
        f"  - name: {name}\n" for name in registry.PLUGINS if name != "capacity"
    )
    policy = build_policy(parse_scheduler_config(conf))
    assert set(policy.plugins) == set(registry.PLUGINS) - {"capacity"}
