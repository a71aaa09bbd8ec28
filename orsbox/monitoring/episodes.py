"""Every episode recorded in an embedded SQLite database, for reading later.

An episode is one session: its environment, task, prompt, every tool call (tool, input,
output capped, outcome, reward, finished, duration, error), how it ended, its final
reward and what its sandbox used. Secrets are redacted before a record is queued
(while the session's secrets are still known; see `orsbox.server.secrets`).

Writing never holds up a tool call: the server only puts a record on a queue, and one
writer thread commits what has queued in one transaction, within about fifty
milliseconds of the call (`LINGER_S`). The database is in WAL mode, so readers (the status page, `orsbox episodes`) never
wait for the writer, and a server killed outright (SIGKILL) leaves every committed
call readable. A full disk, a locked or unwritable database costs the records of that
moment and a warning (at most one a minute), never a failed call or episode.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from orsbox.authoring.reward_hacking import METADATA_KEY, findings_of

log = logging.getLogger("orsbox.episodes")

SCHEMA = """
CREATE TABLE IF NOT EXISTS episodes (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    environment TEXT NOT NULL,
    task TEXT,
    prompt TEXT,
    started_at REAL NOT NULL,
    ended_at REAL,
    state TEXT NOT NULL DEFAULT 'running',
    calls INTEGER NOT NULL DEFAULT 0,
    final_reward REAL,
    finished INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    usage TEXT,
    grading_cause TEXT
);
CREATE INDEX IF NOT EXISTS episodes_by_start ON episodes (started_at);
CREATE TABLE IF NOT EXISTS calls (
    episode_id TEXT NOT NULL REFERENCES episodes (id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    tool TEXT NOT NULL,
    input TEXT,
    output TEXT,
    outcome TEXT NOT NULL,
    reward REAL,
    finished INTEGER NOT NULL DEFAULT 0,
    duration_s REAL,
    error TEXT,
    started_at REAL,
    PRIMARY KEY (episode_id, seq)
);
"""

ADDED_COLUMNS = (("grading_cause", "TEXT"),)  # (name, type) added to `episodes` since 0.1
MAX_PENDING = 100_000  # records queued past this are dropped (with a warning)
BATCH = 2000  # records per transaction at most
LINGER_S = 0.05  # how long a transaction waits for more records after the first
WARN_EVERY_S = 60.0
RETENTION_EVERY_S = 3600.0
CAP_MARKER = "\n[... {cut} characters not recorded ...]\n"

_STOP = object()


def default_path() -> Path:
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "orsbox" / "episodes.sqlite3"


def connect(path: Path | str, *, timeout_s: float = 5.0) -> sqlite3.Connection:
    """A connection with the schema in place (WAL mode: readers never block the writer)."""
    conn = sqlite3.connect(
        str(path), timeout=timeout_s, isolation_level=None, check_same_thread=False
    )
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(
        "PRAGMA synchronous=NORMAL"
    )  # WAL + NORMAL: a process crash loses nothing committed
    conn.execute("PRAGMA foreign_keys=ON")
    conn.executescript(SCHEMA)
    _add_missing_columns(conn)
    return conn


def _add_missing_columns(conn: sqlite3.Connection) -> None:
    """Columns added since a database was made (`CREATE TABLE IF NOT EXISTS` keeps an
    old table as it is): a database from an older orsbox stays readable and writable."""
    have = {row["name"] for row in conn.execute("PRAGMA table_info(episodes)")}
    for name, kind in ADDED_COLUMNS:
        if name not in have:
            with contextlib.suppress(sqlite3.OperationalError):  # another process added it
                conn.execute(f"ALTER TABLE episodes ADD COLUMN {name} {kind}")


def cap_text(text: str | None, cap: int) -> str | None:
    """`text` cut to about `cap` characters, head and tail kept around a marker."""
    if text is None or len(text) <= cap:
        return text
    half = cap // 2
    return text[:half] + CAP_MARKER.format(cut=len(text) - 2 * half) + text[-half:]


def cap_output(payload: str | None, cap: int) -> str | None:
    """A tool result (JSON) with each long text block capped; still valid JSON."""
    if payload is None or len(payload) <= cap:
        return payload
    try:
        result = json.loads(payload)
        for block in (result.get("output") or {}).get("blocks") or []:
            if isinstance(block.get("text"), str):
                block["text"] = cap_text(block["text"], cap)
            if isinstance(block.get("data"), str):  # images: kept out of the record
                block["data"] = cap_text(block["data"], 64)
        return json.dumps(result, ensure_ascii=False)
    except (ValueError, AttributeError, TypeError):
        return cap_text(payload, cap)


class EpisodeRecorder:
    """Queues records and writes them from one thread; see the module docstring."""

    def __init__(
        self,
        path: Path | str,
        *,
        output_cap_chars: int = 16 * 1024,
        retention_days: float | None = None,
    ) -> None:
        self.path = Path(path)
        self.output_cap = output_cap_chars
        self.retention_days = retention_days
        # records lost, each counted by the one thread that drops them
        self._dropped_queued = 0  # the queue was full (the server's thread)
        self._dropped_failed = 0  # the database refused them (the writer's thread)
        self.written = 0
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._last_warning = -WARN_EVERY_S
        self._thread: threading.Thread | None = None

    # -- the server's side: never blocks ---------------------------------------------
    def start(self) -> bool:
        """Open the database and start the writer; False (and a warning) if it cannot."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = connect(self.path)
        except (OSError, sqlite3.Error) as e:
            log.warning("episodes will not be recorded: cannot open %s: %s", self.path, e)
            return False
        self._thread = threading.Thread(
            target=self._write_forever, args=(conn,), name="orsbox-episodes", daemon=True
        )
        self._thread.start()
        return True

    def episode_started(
        self, episode_id: str, session_id: str, environment: str, task: str | None
    ) -> None:
        self._put(
            "INSERT OR REPLACE INTO episodes (id, session_id, environment, task, started_at) VALUES (?, ?, ?, ?, ?)",
            (episode_id, session_id, environment, task, time.time()),
        )

    def prompt(self, episode_id: str, prompt: str) -> None:
        self._put(
            "UPDATE episodes SET prompt = ? WHERE id = ? AND prompt IS NULL", (prompt, episode_id)
        )

    def call(
        self,
        episode_id: str,
        seq: int,
        *,
        tool: str,
        tool_input: str,
        output: str | None,
        outcome: str,
        reward: float | None,
        finished: bool,
        duration_s: float,
        error: str | None,
        started_at: float,
    ) -> None:
        self._put(
            _CALL,
            (
                episode_id,
                seq,
                tool,
                tool_input,
                output,
                outcome,
                reward,
                finished,
                duration_s,
                error,
                started_at,
            ),
        )

    def episode_ended(
        self, episode_id: str, state: str, error: str | None, usage: dict[str, Any]
    ) -> None:
        self._put(
            "UPDATE episodes SET ended_at = ?, state = ?, error = COALESCE(?, error), usage = ? WHERE id = ?",
            (time.time(), state, error, json.dumps(usage), episode_id),
        )

    def grading_error(self, episode_id: str, cause: str, error: str) -> None:
        """The episode's grader could not run: its state says so from now on (while the
        session lives too), with the message and the cause."""
        self._put(
            "UPDATE episodes SET state = 'grading_error', error = ?, grading_cause = ? WHERE id = ?",
            (error, cause, episode_id),
        )

    def _put(self, sql: str, params: tuple[Any, ...]) -> None:
        if self._thread is None:
            return
        if self._queue.qsize() >= MAX_PENDING:
            self._dropped_queued += 1
            self._warn(f"the episode writer is {MAX_PENDING} records behind; dropping records")
            return
        self._queue.put((sql, params))

    @property
    def dropped(self) -> int:
        """Records lost so far (a full queue, a full disk, a locked database)."""
        return self._dropped_queued + self._dropped_failed

    def close(self, timeout_s: float = 10.0) -> None:
        """Write what is queued, then stop the writer."""
        if self._thread is None:
            return
        self._queue.put(_STOP)
        self._thread.join(timeout_s)
        self._thread = None

    # -- the writer thread -------------------------------------------------------------
    def _write_forever(self, conn: sqlite3.Connection) -> None:
        self._apply_retention(conn)
        last_retention = time.monotonic()
        stopping = False
        while not stopping:
            batch = self._next_batch()
            if _STOP in batch:
                stopping = True
                batch = [item for item in batch if item is not _STOP]
            self._write(conn, batch)
            if time.monotonic() - last_retention > RETENTION_EVERY_S:
                last_retention = time.monotonic()
                self._apply_retention(conn)
        conn.close()

    def _next_batch(self) -> list[Any]:
        """The next record and what queues within `LINGER_S` after it: a busy server's
        calls share a transaction instead of paying one each. The writer sleeps through
        the linger rather than waiting on the queue, so it wakes twice a batch, not once
        a record: each wake-up asks the event loop's thread for the GIL, and at 64 busy
        sessions per-record wake-ups cost the calls ~3 ms at p50 (BENCHMARKS.md)."""
        batch = [self._queue.get()]
        if batch[-1] is not _STOP:
            time.sleep(LINGER_S)
        while len(batch) < BATCH and batch[-1] is not _STOP:
            try:
                batch.append(self._queue.get_nowait())
            except queue.Empty:
                break
        return batch

    def _write(self, conn: sqlite3.Connection, batch: list[tuple[str, tuple[Any, ...]]]) -> None:
        """One transaction; runs of the same statement go to `executemany` (the calls of
        a busy server are most of a batch), in queue order so an episode's row is
        always written before its calls."""
        if not batch:
            return
        try:
            conn.execute("BEGIN IMMEDIATE")
            for sql, run in itertools.groupby(batch, key=lambda item: item[0]):
                rows = [params for _, params in run]
                if sql is _CALL:
                    rows = [self._capped_call(params) for params in rows]
                    conn.executemany(_CALL, rows)
                    conn.executemany(_CALL_TOTALS, [(r[6], r[7], r[0]) for r in rows])
                else:
                    conn.executemany(sql, rows)
            conn.execute("COMMIT")
            self.written += len(batch)
        except sqlite3.Error as e:
            self._dropped_failed += len(batch)
            self._warn(f"could not record {len(batch)} episode record(s) in {self.path}: {e}")
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")

    def _capped_call(self, params: tuple[Any, ...]) -> tuple[Any, ...]:
        cap = self.output_cap
        values = list(params)
        values[3] = cap_text(values[3], cap)  # input
        values[4] = cap_output(values[4], cap)  # output
        values[9] = cap_text(values[9], cap)  # error
        return tuple(values)

    def _apply_retention(self, conn: sqlite3.Connection) -> None:
        if not self.retention_days:  # 0 or None: keep every episode
            return
        cutoff = time.time() - self.retention_days * 86400
        try:
            conn.execute(
                "DELETE FROM episodes WHERE started_at < ? AND ended_at IS NOT NULL", (cutoff,)
            )
        except sqlite3.Error as e:
            self._warn(f"could not remove old episodes from {self.path}: {e}")

    def _warn(self, message: str) -> None:
        now = time.monotonic()
        if now - self._last_warning >= WARN_EVERY_S:
            self._last_warning = now
            log.warning("%s (%d dropped so far)", message, self.dropped)


_CALL = (
    "INSERT OR REPLACE INTO calls (episode_id, seq, tool, input, output, outcome, reward, "
    "finished, duration_s, error, started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_CALL_TOTALS = (
    "UPDATE episodes SET calls = calls + 1, final_reward = COALESCE(?, final_reward), "
    "finished = MAX(finished, ?) WHERE id = ?"
)


# -- reading (the status page and `orsbox episodes`) -----------------------------------
EPISODE_COLUMNS = "id, session_id, environment, task, started_at, ended_at, state, calls, final_reward, finished, error, usage, grading_cause"


def episode_dict(row: sqlite3.Row) -> dict[str, Any]:
    episode = _decoded(dict(row), ("task", "usage", "prompt"))
    if "finished" in episode:
        episode["finished"] = bool(episode["finished"])
    return episode


# A call whose recorded result carries a reward-hacking report with a finding
# (orsbox.authoring.reward_hacking; the output is capped block by block, so it stays JSON).
_FLAGGED = (
    "EXISTS (SELECT 1 FROM calls c WHERE c.episode_id = episodes.id AND json_valid(c.output) "
    f"AND json_extract(c.output, '$.output.metadata.{METADATA_KEY}.flagged') = 1)"
)


def recent(
    conn: sqlite3.Connection,
    limit: int = 50,
    environment: str | None = None,
    *,
    flagged: bool = False,
) -> list[dict[str, Any]]:
    """The newest episodes; `flagged`: only those a grader's reward-hacking report flagged."""
    conditions = (["environment = ?"] if environment else []) + ([_FLAGGED] if flagged else [])
    where = f"WHERE {' AND '.join(conditions)}" if conditions else ""
    rows = conn.execute(
        f"SELECT {EPISODE_COLUMNS} FROM episodes {where} ORDER BY started_at DESC LIMIT ?",
        (*([environment] if environment else []), limit),
    )
    return [episode_dict(r) for r in rows]


def hacking_findings(episode: dict[str, Any]) -> list[str]:
    """What the reward-hacking reports in the episode's recorded results found, one line
    per finding ([] for a clean or ungraded episode)."""
    found: list[str] = []
    for call in episode.get("calls", []):
        output = call.get("output")
        result = output.get("output") if isinstance(output, dict) else None
        if isinstance(result, dict):
            found += findings_of(result.get("metadata"))
    return found


def find(conn: sqlite3.Connection, episode_id: str) -> dict[str, Any] | None:
    """One episode with its prompt and calls; an unambiguous id prefix is enough."""
    rows = conn.execute(
        f"SELECT {EPISODE_COLUMNS}, prompt FROM episodes WHERE id LIKE ? || '%' LIMIT 2",
        (episode_id.replace("%", "").replace("_", ""),),
    ).fetchall()
    return _with_calls(conn, rows[0]) if len(rows) == 1 else None


def call_dict(row: sqlite3.Row) -> dict[str, Any]:
    call = _decoded(dict(row), ("input", "output"))
    call["finished"] = bool(call["finished"])
    return call


def _decoded(record: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """`record` with the JSON text of `keys` decoded (text that is not JSON stays)."""
    for key in keys:
        if record.get(key):
            with contextlib.suppress(ValueError):
                record[key] = json.loads(record[key])
    return record


def every_episode(conn: sqlite3.Connection) -> Iterator[dict[str, Any]]:
    """Every episode with its calls, oldest first (for export)."""
    for row in conn.execute(f"SELECT {EPISODE_COLUMNS}, prompt FROM episodes ORDER BY started_at"):
        yield _with_calls(conn, row)


def _with_calls(conn: sqlite3.Connection, row: sqlite3.Row) -> dict[str, Any]:
    episode = episode_dict(row)
    calls = conn.execute("SELECT * FROM calls WHERE episode_id = ? ORDER BY seq", (row["id"],))
    episode["calls"] = [call_dict(c) for c in calls]
    return episode
