"""Volcano's `predicates` plugin: kube-scheduler's own filters (node affinity, ports, taints,
pod affinity, volumes, topology spread). In vulcan kube-scheduler runs them itself before it
asks the extender, so the plugin registers nothing here; the extender's filter sees only the
nodes that passed them."""

from __future__ import annotations

from plugins.framework.extension_points import SessionPlugin


class PredicatesPlugin(SessionPlugin):
    name = "predicates"
