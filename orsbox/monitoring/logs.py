"""`--log-format json`: one JSON object a line, for log shippers.

Each line carries the session and the tool call it was written for (when there is
one), read from context variables the server sets while it works for a session, so
no log call site needs to pass them. The human format stays the default.
"""

from __future__ import annotations

import contextvars
import datetime
import json
import logging

from orsbox.protocol.calls import CURRENT_TASK_ID

SESSION_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "orsbox_session_id", default=None
)

LOG_FORMATS = ("human", "json")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if (sid := SESSION_ID.get()) is not None:
            line["session_id"] = sid
        if (task_id := CURRENT_TASK_ID.get()) is not None:
            line["call_id"] = task_id
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)
