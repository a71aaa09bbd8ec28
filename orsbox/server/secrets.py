"""Secrets from `/create`: where they come from and how they are kept out of sight.

Clients send secrets in the `/create` body (`{"key": "value"}`, as the spec pages show)
or in an `X-Secrets` header (base64 JSON `{"key": {"value": "..."}}`, as the ors-sdk
and openreward clients do). Until handed to the environment they are `SecretStr`.
While a session lives its secret values are registered here, and everything that
leaves the server — log lines, tracebacks, error messages, tool results — passes
through `redact`, so a secret that an environment echoes by mistake still never shows
(a server process also redacts what is printed to its stdout and stderr).
Values shorter than `MIN_SECRET_CHARS` are not redacted (they would shred ordinary
text) — use real secrets.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import sys
from collections import Counter
from collections.abc import Iterable
from typing import Any

from pydantic import SecretStr

from orsbox.errors import BadRequest

MIN_SECRET_CHARS = 4
REDACTED = "[redacted]"


def parse_secrets_header(raw: str | None) -> dict[str, SecretStr]:
    if not raw:
        return {}
    try:
        payload = json.loads(base64.b64decode(raw, validate=True))
    except (binascii.Error, ValueError) as e:
        raise BadRequest("X-Secrets header must be base64-encoded JSON") from e
    if not isinstance(payload, dict):
        raise BadRequest("X-Secrets header must encode a JSON object")
    secrets: dict[str, SecretStr] = {}
    for key, entry in payload.items():
        value = entry.get("value") if isinstance(entry, dict) else entry
        if not isinstance(value, str):
            raise BadRequest(f'X-Secrets entry {key!r} must be a string or {{"value": str}}')
        secrets[key] = SecretStr(value)
    return secrets


def merge_secrets(body: dict[str, str] | None, header: str | None) -> dict[str, SecretStr]:
    """Body and header secrets together; the header wins on a clash."""
    merged = {k: SecretStr(v) for k, v in (body or {}).items()}
    merged.update(parse_secrets_header(header))
    return merged


class SecretRegistry:
    """The secret values of live sessions, counted so two sessions may share one."""

    def __init__(self) -> None:
        self._values: Counter[str] = Counter()

    def add(self, secrets: dict[str, SecretStr]) -> list[str]:
        values = [s.get_secret_value() for s in secrets.values()]
        values = [v for v in values if len(v) >= MIN_SECRET_CHARS]
        self._values.update(values)
        return values

    def remove(self, values: list[str]) -> None:
        self._values.subtract(values)
        self._values += Counter()  # drop zero counts

    def redact(self, text: str) -> str:
        if not self._values or not text:
            return text
        for value in sorted(self._values, key=len, reverse=True):
            if value in text:
                text = text.replace(value, REDACTED)
            escaped = json.dumps(value, ensure_ascii=False)[1:-1]
            if escaped != value and escaped in text:
                text = text.replace(escaped, REDACTED)
        return text


LIVE_SECRETS = SecretRegistry()


class RedactingFormatter(logging.Formatter):
    """Wraps a handler's formatter and redacts the finished line (message, traceback,
    access-log fields alike), so no record format needs to be known here."""

    def __init__(self, inner: logging.Formatter | None, registry: SecretRegistry = LIVE_SECRETS):
        super().__init__()
        self.inner = inner or logging.Formatter()
        self.registry = registry

    def format(self, record: logging.LogRecord) -> str:
        return self.registry.redact(self.inner.format(record))


class RedactingStream:
    """`sys.stdout` / `sys.stderr` for a server process: what environment code prints,
    warnings and uncaught thread tracebacks are written there without logging, so
    each write is redacted too (a secret cut across two writes is not)."""

    def __init__(self, inner: Any, registry: SecretRegistry = LIVE_SECRETS) -> None:
        self.inner = inner
        self.registry = registry

    def write(self, text: str) -> int:
        self.inner.write(self.registry.redact(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # flush, fileno, encoding, isatty ...
        return getattr(self.inner, name)


def install_stream_redaction() -> None:
    """Redact this process's stdout and stderr (for a process that is the server)."""
    if not isinstance(sys.stdout, RedactingStream):
        sys.stdout = RedactingStream(sys.stdout)
    if not isinstance(sys.stderr, RedactingStream):
        sys.stderr = RedactingStream(sys.stderr)


def install_log_redaction() -> None:
    """Wrap the formatter of every handler that server logs can reach."""
    names = ["", "uvicorn", "uvicorn.error", "uvicorn.access", "orsbox"]
    for name in names:
        for handler in logging.getLogger(name).handlers:
            if not isinstance(handler.formatter, RedactingFormatter):
                handler.setFormatter(RedactingFormatter(handler.formatter))
