"""An evaluation's folder (`--out`): what was asked, what came out, and how to resume.

    run.json          the model, environment and split this folder belongs to
    results.jsonl     one record per finished episode, keyed by (split, task, epoch)
    transcripts/      one JSON file per episode: every message, tool spec and call
    summary.json      the report of the last run (`orsbox.evaluation.report`)

A record is appended as one line with one write and an fsync once its episode ends,
so a run killed at any moment loses at most the episodes still running; a torn last
line (a kill during the write) is cut off when the folder is opened again. A rerun
reads the records and plays only the episodes that have none. A lock keeps a second
run out of the same folder.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

from orsbox.errors import OrsboxError

Key = tuple[str, int, int]  # (split, task index, epoch)
SAME_RUN_FIELDS = ("env", "split", "model")


class ResultsError(OrsboxError):
    """The folder belongs to another run, or another run is using it."""


def key_of(record: dict[str, Any]) -> Key:
    return (record["split"], int(record["task"]), int(record["epoch"]))


class ResultStore:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.results_path = folder / "results.jsonl"
        self.summary_path = folder / "summary.json"
        self.transcripts = folder / "transcripts"
        self._lock: int | None = None

    def open(self, run: dict[str, Any]) -> dict[Key, dict[str, Any]]:
        """Lock the folder, check it belongs to `run`, and return the records in it
        (the last one of a key wins: a retried error supersedes the error)."""
        self.transcripts.mkdir(parents=True, exist_ok=True)
        self._take_lock()
        self._check_run(run)
        return {key_of(r): r for r in self._read()}

    def close(self) -> None:
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def append(self, record: dict[str, Any], transcript: dict[str, Any]) -> None:
        """The transcript first, then the record that points at it."""
        split, task, epoch = key_of(record)
        name = f"{_safe(split)}-{task}-{epoch}.json"
        _write_atomic(self.transcripts / name, json.dumps(transcript, ensure_ascii=False))
        line = json.dumps({**record, "transcript": f"transcripts/{name}"}, ensure_ascii=False)
        with self.results_path.open("a") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())

    def write_summary(self, summary: dict[str, Any]) -> None:
        _write_atomic(self.summary_path, json.dumps(summary, indent=2))

    # -- plumbing

    def _take_lock(self) -> None:
        fd = os.open(self.folder / ".lock", os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ResultsError(f"{self.folder} is in use by another orsbox eval") from None
        self._lock = fd

    def _check_run(self, run: dict[str, Any]) -> None:
        path = self.folder / "run.json"
        if path.exists():
            before = json.loads(path.read_text())
            for name in SAME_RUN_FIELDS:
                if before.get(name) != run.get(name):
                    raise ResultsError(
                        f"{self.folder} holds a run with {name} {before.get(name)!r}, not "
                        f"{run.get(name)!r}: use another --out"
                    )
        _write_atomic(path, json.dumps(run, indent=2))

    def _read(self) -> list[dict[str, Any]]:
        if not self.results_path.exists():
            return []
        data = self.results_path.read_bytes()
        complete = data[: data.rfind(b"\n") + 1]
        if len(complete) < len(data):  # a torn last line: cut it off before appending
            with self.results_path.open("r+b") as f:
                f.truncate(len(complete))
        return [json.loads(line) for line in complete.decode().splitlines() if line.strip()]


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def _write_atomic(path: Path, text: str) -> None:
    staging = path.with_name(f".{path.name}.tmp")
    staging.write_text(text)
    staging.replace(path)
