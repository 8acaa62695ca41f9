"""The job controller's own flags of `vulcan controllers` (no heavy imports)."""

from __future__ import annotations

import argparse

from core.controller.flags import positive


def add_job_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--worker-threads",
        type=positive,
        default=3,
        help="concurrent Job reconciles (Volcano's job-controller flag; default 3)",
    )
