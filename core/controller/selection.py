"""`--controllers`: which controllers run, in Kubernetes' and Volcano's list syntax.

`*` enables every controller that is on by default, `name` enables one, `-name` disables one;
the first item that names a controller decides for it (so `-x,*` and `*,-x` both leave `x`
off), as kube-controller-manager's `IsControllerEnabled` and Volcano's controller-manager read
it. Volcano's names are accepted even for controllers this build does not have, so a Volcano
deployment's `--controllers=*,-sharding-controller` works unchanged; asking for one of those
by name is an error rather than a silent no-op.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

PODGROUP = "pg-controller"
QUEUE = "queue-controller"

# Every controller name Volcano's controller-manager knows (pkg/controllers/*).
VOLCANO_CONTROLLERS = (
    "cronjob-controller",
    "gc-controller",
    "hypernode-controller",
    "job-controller",
    "jobflow-controller",
    "jobtemplate-controller",
    PODGROUP,
    QUEUE,
    "sharding-controller",
)
DISABLED_BY_DEFAULT = frozenset({"sharding-controller"})  # Volcano's `*,-sharding-controller`
DEFAULT_SELECTION = "*"


class SelectionError(ValueError):
    """A `--controllers` value that names no known controller, or one this build lacks."""


def parse_selection(text: str) -> list[str]:
    """The items of a `--controllers` value, validated: `*`, `name` or `-name`."""
    items = [item.strip() for item in text.split(",")]
    if not any(items):
        raise SelectionError("--controllers is empty (use * for all controllers)")
    known = ", ".join(VOLCANO_CONTROLLERS)
    for item in items:
        if not item:
            raise SelectionError(f"--controllers {text!r}: empty item")
        if item != "*" and item.removeprefix("-") not in VOLCANO_CONTROLLERS:
            raise SelectionError(
                f"--controllers: unknown controller {item.removeprefix('-')!r} (known: {known})"
            )
    return items


def is_enabled(name: str, items: Sequence[str], disabled_by_default: Collection[str]) -> bool:
    """The first item naming `name` (as `name` or `-name`) decides; else `*` enables it unless
    it is off by default."""
    star = False
    for item in items:
        if item == name:
            return True
        if item == "-" + name:
            return False
        star = star or item == "*"
    return star and name not in disabled_by_default


def select_controllers(
    text: str,
    available: Sequence[str],
    *,
    disabled_by_default: Collection[str] = DISABLED_BY_DEFAULT,
) -> list[str]:
    """The controllers of `available` (in that order) that `text` enables. A controller named
    explicitly that this build does not have is an error."""
    items = parse_selection(text)
    missing = [i for i in items if i in VOLCANO_CONTROLLERS and i not in available]
    if missing:
        raise SelectionError(
            f"--controllers: {', '.join(missing)} not available in this build "
            f"(available: {', '.join(available)})"
        )
    return [name for name in available if is_enabled(name, items, disabled_by_default)]
