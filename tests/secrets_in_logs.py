"""No credential is ever logged: the suite remembers every token it mints
and searches every log of every netpeerd it runs (in-process records and the
log files of child processes) for them, and for anything shaped like one."""

from __future__ import annotations

import logging
import re
import threading
from pathlib import Path

from netpeer.api.client import Client
from netpeer.service.tokens import Tokens

TOKEN_SHAPE = re.compile(r"np_[A-Za-z0-9]+_[A-Za-z0-9-]{16,}")
# A bare secret (tokens minted by a child process are not remembered): 43
# characters of [A-Za-z0-9-], alone (hashes are 64, uuids 36).
SECRET_SHAPE = re.compile(r"(?<![A-Za-z0-9-])[A-Za-z0-9-]{43}(?![A-Za-z0-9-])")


class Watch(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.secrets: set[str] = set()
        self.records: list[str] = []
        self._lock2 = threading.Lock()
        self._patched: list[tuple[object, str, object]] = []

    # ------------------------------------------------------------ capture
    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
            if record.exc_info:
                text += logging.Formatter().formatException(record.exc_info)
        except Exception:
            return
        with self._lock2:
            self.records.append(text)

    def _remember(self, token: str) -> None:
        with self._lock2:
            self.secrets.add(token)
            self.secrets.add(token.rsplit("_", 1)[-1])

    def install(self) -> None:
        root = logging.getLogger()
        root.addHandler(self)
        # netpeerd runs at INFO: so do the in-process ones, for this search.
        self._level = root.level
        if root.level > logging.INFO or root.level == logging.NOTSET:
            root.setLevel(logging.INFO)
        watch = self
        original_create, original_client = Tokens.create, Client.create_token

        def create(self, *args, **kwargs):
            secret, token = original_create(self, *args, **kwargs)
            watch._remember(secret)
            return secret, token

        def create_token(self, *args, **kwargs):
            answer = original_client(self, *args, **kwargs)
            watch._remember(answer["token"])
            return answer
        self._patched = [(Tokens, "create", original_create), (Client, "create_token", original_client)]
        Tokens.create, Client.create_token = create, create_token

    def uninstall(self) -> None:
        logging.getLogger().removeHandler(self)
        logging.getLogger().setLevel(self._level)
        for owner, name, original in self._patched:
            setattr(owner, name, original)

    # ------------------------------------------------------------ search
    def mark(self) -> int:
        with self._lock2:
            return len(self.records)

    def leaks(self, directory: Path, since: int = 0) -> list[str]:
        """Log lines (in-process since ``since``, and every *.log under
        ``directory``) that hold a remembered secret or a token."""
        with self._lock2:
            lines = list(self.records[since:])
            del self.records[since:]   # searched: no need to keep them
            secrets = {s for s in self.secrets if len(s) >= 16}
        for path in Path(directory).rglob("netpeerd*.log"):   # netpeerd's own logs
            try:
                lines += path.read_text(errors="replace").splitlines()
            except OSError:
                continue
        return [line[:200] for line in lines
                if TOKEN_SHAPE.search(line) or SECRET_SHAPE.search(line) or any(s in line for s in secrets)]
