"""manifests/components/bind-marker, the opt-in restricted bind for the second-scheduler install:
`kubectl kustomize` of an overlay listing it renders the overlay as it is but for the bind
entry's `managedResources` (vulcan.sh/managed-bind) and `--bind-marker` on the extender and
the controllers; the overlay without it (the default install) binds every pod through vulcan."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from core.api.keys import BINDING_MARKER
from sim.scheduler.config import parse_config
from tests.helpers import REPO

KUBECTL = shutil.which("kubectl")
MANIFESTS = REPO / "manifests"
COMPONENT = MANIFESTS / "components" / "bind-marker"
FLAG = f"--bind-marker={BINDING_MARKER}"
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")

Docs = dict[tuple[str, str], dict[str, Any]]


def render(directory: Path) -> Docs:
    assert KUBECTL is not None
    result = subprocess.run(
        [KUBECTL, "kustomize", str(directory)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    docs = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def with_component(tmp_path: Path, overlay: str) -> Docs:
    """The overlay rendered as a user's kustomization that lists the component renders it
    (kustomize wants relative paths)."""
    here = tmp_path / overlay
    here.mkdir()
    (here / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "resources": [os.path.relpath(MANIFESTS / "overlays" / overlay, here)],
                "components": [os.path.relpath(COMPONENT, here)],
            }
        )
    )
    return render(here)


def scheduler_config(docs: Docs) -> dict[str, Any]:
    text = docs[("ConfigMap", "vulcan-scheduler-config")]["data"]["config.yaml"]
    return dict(yaml.safe_load(text))


def args(docs: Docs, deployment: str) -> list[str]:
    return list(
        docs[("Deployment", deployment)]["spec"]["template"]["spec"]["containers"][0]["args"]
    )


def bind_entry(config: dict[str, Any]) -> dict[str, Any]:
    (entry,) = [e for e in config["extenders"] if e.get("bindVerb")]
    return dict(entry)


@pytest.mark.parametrize(
    "overlay",
    ["second-scheduler", "second-scheduler-webhooks", "second-scheduler-self-signed-webhooks"],
)
def test_the_component_restricts_the_bind_entry_and_nothing_else(
    tmp_path: Path, overlay: str
) -> None:
    default = render(MANIFESTS / "overlays" / overlay)
    restricted = with_component(tmp_path, overlay)
    assert set(restricted) == set(default)

    # The default install: every pod of the profile binds through vulcan, no marker asked.
    assert "managedResources" not in bind_entry(scheduler_config(default))
    for deployment in ("vulcan-extender", "vulcan-controllers"):
        assert not [a for a in args(default, deployment) if a.startswith("--bind-marker")]

    # With the component: only marked pods' binds come to vulcan, the extender refuses an
    # unmarked gang member and the job controller marks the pods of Volcano Jobs.
    config = scheduler_config(restricted)
    assert bind_entry(config)["managedResources"] == [
        {"name": BINDING_MARKER, "ignoredByScheduler": True}
    ]
    parsed = parse_config(config)  # a configuration kube-scheduler's rules accept
    assert BINDING_MARKER in parsed.ignored_resources  # no node needs to have it
    for deployment in ("vulcan-extender", "vulcan-controllers"):
        assert args(restricted, deployment) == [*args(default, deployment), FLAG]

    # Everything else as the overlay renders it (the component copies the configuration).
    bind_entry_default = bind_entry(scheduler_config(default))
    config["extenders"] = [
        bind_entry_default if e.get("bindVerb") else e for e in config["extenders"]
    ]
    assert config == scheduler_config(default)
    for name in default:
        if name[0] == "Deployment" and name[1] in ("vulcan-extender", "vulcan-controllers"):
            continue
        if name == ("ConfigMap", "vulcan-scheduler-config"):
            continue
        assert restricted[name] == default[name], name


def test_the_benchmark_and_the_real_tier_install_the_component_when_asked(tmp_path: Path) -> None:
    """bench/real_throughput.py measures the install as shipped by default and with the
    component under `--bind-marker`; the real tier installs it for a module that lists it."""
    from types import SimpleNamespace

    from bench.real_cluster import install_extenders
    from bench.real_throughput import components, parse_args
    from vulcan.real_cluster.install import VulcanInstall
    from vulcan.real_cluster.manifests import container_args

    assert components(parse_args([])) == ()
    assert components(parse_args(["--bind-marker"])) == ("bind-marker",)
    assert "managedResources" not in bind_entry({"extenders": install_extenders()})
    restricted = install_extenders(components(parse_args(["--bind-marker"])))
    assert bind_entry({"extenders": restricted})["managedResources"] == [
        {"name": BINDING_MARKER, "ignoredByScheduler": True}
    ]
    plane: Any = SimpleNamespace(root=tmp_path)
    for listed, flagged in (((), False), (("bind-marker",), True)):
        install = VulcanInstall(plane, "second-scheduler", node_profiles=[], components=listed)
        for deployment in ("vulcan-extender", "vulcan-controllers"):
            assert (FLAG in container_args(install.docs, deployment)) is flagged
