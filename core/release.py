"""vulcan's release, as its installed distribution says (`0+unknown` from a bare checkout)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def release() -> str:
    try:
        return version("vulcan")
    except PackageNotFoundError:
        return "0+unknown"
