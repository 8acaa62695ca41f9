"""Structured logging: `text` for people, `json` (one object per line) for log pipelines."""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

import orjson

_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None)).keys()) | {
    "message",
    "asctime",
}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD:
                entry[key] = value
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


def _text_value(value: Any) -> str:
    text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
    return f'"{text}"' if (" " in text or '"' in text or not text) else text


class TextFormatter(logging.Formatter):
    """`time LEVEL logger: message key=value ...`: the structured fields of a line (its
    `extra`) after the message, so a text log says which queue, job or pod it is about."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = [
            f"{key}={_text_value(value)}"
            for key, value in vars(record).items()
            if key not in _STANDARD and key != "decision"
        ]
        if not fields:
            return line
        head, newline, rest = line.partition("\n")  # a traceback stays below the fields
        return head + " " + " ".join(fields) + newline + rest


def setup_logging(fmt: str = "text", level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
