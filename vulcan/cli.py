"""The `vulcan` command: one front door, a subcommand per part."""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import PackageNotFoundError, version


def _version() -> str:
    try:
        return version("vulcan")
    except PackageNotFoundError:
        return "0+unknown"


def _cmd_validate(args: argparse.Namespace) -> int:
    from vulcan.validate import validate_paths

    return validate_paths(args.files)


def _cmd_crds(args: argparse.Namespace) -> int:
    from core.api.crds import all_crds, render, write_crds

    if args.out:
        for path in write_crds(args.out):
            print(path)
        return 0
    sys.stdout.write("---\n".join(render(doc) for doc in all_crds()))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vulcan",
        description="Volcano-compatible gang and queue scheduling for the stock kube-scheduler.",
    )
    parser.add_argument("--version", action="version", version=f"vulcan {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    validate = sub.add_parser(
        "validate",
        help="check Volcano YAML (Job, PodGroup, Queue, Command, JobFlow, JobTemplate)",
        description="Check every object vulcan knows against the models and Volcano's admission "
        "rules. Prints FILE: KIND/NAME: FIELD: reason per problem; exits 1 if any.",
    )
    validate.add_argument("files", nargs="+", metavar="FILE", help="YAML file, or - for stdin")
    validate.set_defaults(func=_cmd_validate)

    crds = sub.add_parser("crds", help="print (or write) the CustomResourceDefinitions")
    crds.add_argument("--out", metavar="DIR", help="write one file per CRD into DIR")
    crds.set_defaults(func=_cmd_crds)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
