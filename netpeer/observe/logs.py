"""Logs: text for people, or one JSON object per line (``log_format =
"json"``), each with the request id of the call it belongs to.

A client may send its own request id (``x-request-id`` metadata, up to 64
letters, digits, dots, dashes and underscores); otherwise one is made. It
is logged with every line of that call and sent back to the client in the
trailing metadata of every answer, errors included, so a user can quote it
and an operator can find the call. Nothing here ever logs a credential:
messages never quote tokens (the test suite greps every log for them).
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import secrets
import sys
import time

REQUEST_ID_KEY = "x-request-id"
request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="")
_VALID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def new_request_id(offered: str | None) -> str:
    """The client's id if it is well formed, else a fresh one."""
    if offered and _VALID.fullmatch(offered):
        return offered
    return secrets.token_hex(8)


class _RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id.get()
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {"time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
                       + f".{int(record.msecs):03d}Z",
               "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        rid = getattr(record, "request_id", "")
        if rid:
            out["request_id"] = rid
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


class _TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        rid = getattr(record, "request_id", "")
        return f"{line} [request {rid}]" if rid else line


def configure(level: str = "INFO", fmt: str = "text", stream=None) -> None:
    """Sets up the process's logging (``netpeer serve``)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(_RequestIdFilter())
    handler.setFormatter(JsonFormatter() if fmt == "json" else
                         _TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
