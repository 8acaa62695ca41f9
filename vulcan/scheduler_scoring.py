"""`vulcan scheduler-scoring`: the conf's node order as kube-scheduler profile fields
(`plugins.kube_scoring`), for the profile that calls vulcan's extender.

Prints a YAML fragment to merge into the profile (`plugins`, `pluginConfig`) and, in comments,
what the rendering assumes; the extender entry then drops `prioritizeVerb` (and `weight`). When
kube-scheduler's scoring cannot express the conf, it prints why and that `prioritizeVerb` stays.
"""

from __future__ import annotations

import argparse
import sys

import yaml

from plugins.config import ConfigError, load_scheduler_config
from plugins.kube_scoring import NotExpressible, render_node_order


def main(args: argparse.Namespace) -> int:
    try:
        conf = load_scheduler_config(args.config)
    except (ConfigError, OSError) as exc:
        print(f"vulcan scheduler-scoring: {exc}", file=sys.stderr)
        return 1
    rendered = render_node_order(conf)
    if isinstance(rendered, NotExpressible):
        print(f"# not expressible: {rendered.reason}")
        print("# keep `prioritizeVerb: prioritize` and `weight: 1` in the extender entry and the")
        print("# profile's default scoring.")
        return 0
    print("# Merge into the profile of schedulerName volcano; drop `prioritizeVerb` and `weight`")
    print("# from the extender entry (the extender needs no prioritize call).")
    for note in rendered.notes:
        print(f"# note: {note}")
    sys.stdout.write(yaml.safe_dump(rendered.profile_fields(), sort_keys=False))
    return 0
