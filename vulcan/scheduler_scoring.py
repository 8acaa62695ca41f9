"""`vulcan scheduler-scoring`: what the kube-scheduler profile that calls vulcan's extender needs
for a conf (`plugins.framework.kube_scoring.plan_profile`).

Prints, as comments, whether the extender entry keeps `prioritizeVerb` and why, and, when the
conf's node order is rendered as kube-scheduler's own scoring, the YAML fields to merge into the
profile (`plugins`, `pluginConfig`).
"""

from __future__ import annotations

import argparse
import re
import sys

import yaml

from plugins.framework.config import ConfigError, load_scheduler_config
from plugins.framework.kube_scoring import plan_profile

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(\.\d+)?$")


def main(args: argparse.Namespace) -> int:
    match = _VERSION.match(args.kube_version)
    if match is None:
        print(
            f"vulcan scheduler-scoring: --kube-version: expected MAJOR.MINOR (e.g. 1.36), "
            f"not {args.kube_version!r}",
            file=sys.stderr,
        )
        return 2
    try:
        conf = load_scheduler_config(args.config)
    except (ConfigError, OSError) as exc:
        print(f"vulcan scheduler-scoring: {exc}", file=sys.stderr)
        return 1
    plan = plan_profile(conf, (int(match[1]), int(match[2])))
    if plan.prioritize:
        print("# keep `prioritizeVerb: prioritize` and `weight: 1` in the extender entry and the")
        print(f"# profile's default scoring: not expressible: {plan.why}")
        return 0
    print("# drop `prioritizeVerb` and `weight` from the extender entry: " + plan.why)
    if plan.scoring is None:
        print("# the profile keeps kube-scheduler's default scoring")
        return 0
    print("# merge into the profile of schedulerName volcano:")
    for note in plan.scoring.notes:
        print(f"# note: {note}")
    sys.stdout.write(yaml.safe_dump(plan.scoring.profile_fields(), sort_keys=False))
    return 0
