"""The hypernode-controller's flag of `vulcan controllers` (no heavy imports)."""

from __future__ import annotations

import argparse


def add_hypernode_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--hypernode-discovery-config",
        metavar="FILE",
        help="Volcano's controller configuration (the volcano-controller.conf key of "
        "volcano-controller-configmap, mounted as a file): its networkTopologyDiscovery "
        "`label` source builds HyperNodes from node labels (the hypernode-controller's "
        "discovery; off without this file or with no enabled label source)",
    )
