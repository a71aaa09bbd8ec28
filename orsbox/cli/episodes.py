"""`orsbox episodes`: read the episodes a server recorded (`orsbox.monitoring.episodes`).

`list` shows the recent ones, `show ID` one episode's transcript, and `export` writes
every episode with its calls as JSON lines or Parquet, for analysis elsewhere. Reading
never disturbs a server that is writing (the database is in WAL mode)."""

from __future__ import annotations

import contextlib
import datetime
import json
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

out = Console(highlight=False)
app = typer.Typer(
    help="Read the episodes orsbox servers recorded.", no_args_is_help=True, add_completion=False
)

DbOption = Annotated[
    Path | None,
    typer.Option(
        "--db", help="the episode database; default: ORSBOX_EPISODES_DB or the server's default"
    ),
]


@contextlib.contextmanager
def _open(db: Path | None) -> Iterator[sqlite3.Connection]:
    from orsbox.monitoring.episodes import connect, default_path
    from orsbox.settings import Settings

    path = db or Path(Settings().episodes_db or default_path())
    if not path.exists():
        raise typer.BadParameter(f"no episode database at {path}", param_hint="--db")
    try:
        conn = connect(path)
    except sqlite3.Error as e:
        raise typer.BadParameter(f"cannot read {path}: {e}", param_hint="--db") from e
    with contextlib.closing(conn):
        yield conn


@app.command("list")
def list_episodes(
    db: DbOption = None,
    limit: Annotated[int, typer.Option(help="how many, newest first")] = 20,
    environment: Annotated[str | None, typer.Option(help="only this environment")] = None,
    flagged: Annotated[
        bool, typer.Option("--flagged", help="only episodes a reward-hacking report flagged")
    ] = False,
) -> None:
    """The most recent episodes: environment, start, calls, final reward, usage."""
    from orsbox.cli.ps import usage_cells
    from orsbox.monitoring.episodes import recent

    with _open(db) as conn:
        episodes = recent(conn, limit, environment, flagged=flagged)
    if not episodes:
        out.print("No flagged episodes." if flagged else "No episodes recorded.")
        return
    table = Table(
        "ID", "ENVIRONMENT", "STARTED", "STATE", "CALLS", "REWARD", "FINISHED", "CPU", "PEAK MEM"
    )
    for e in episodes:
        usage = e.get("usage")
        if not isinstance(usage, dict):
            usage = {}
        table.add_row(
            e["id"][:12],
            e["environment"],
            _when(e["started_at"]),
            e["state"],
            str(e["calls"]),
            "-" if e["final_reward"] is None else f"{e['final_reward']:g}",
            "yes" if e["finished"] else "no",
            *usage_cells(usage.get("cpu_s"), usage.get("peak_memory_bytes")),
        )
    out.print(table)


@app.command()
def show(
    episode_id: Annotated[str, typer.Argument(help="an episode id (a unique prefix is enough)")],
    db: DbOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="the whole record as JSON")] = False,
) -> None:
    """One episode: task, prompt and every call with its input, output and reward, and
    what its reward-hacking report found."""
    from orsbox.monitoring.episodes import find, hacking_findings

    with _open(db) as conn:
        episode = find(conn, episode_id)
    if episode is None:
        raise typer.BadParameter(f"no single episode matches {episode_id!r}", param_hint="ID")
    if as_json:
        typer.echo(json.dumps(episode, indent=2, ensure_ascii=False))
        return
    out.print(f"[bold]episode {episode['id']}[/]  {episode['environment']}  {episode['state']}")
    out.print(f"task: {json.dumps(episode.get('task'))}")
    out.print(f"prompt: {_text(episode.get('prompt'))}")
    for call in episode["calls"]:
        out.rule(f"#{call['seq']} {call['tool']} ({call['outcome']}, {call['duration_s']:.3f}s)")
        out.print(f"input: {json.dumps(call.get('input'), ensure_ascii=False)}", markup=False)
        out.print(_text(call.get("output")) or call.get("error") or "", markup=False)
        out.print(f"reward: {call['reward']}  finished: {call['finished']}")
    out.rule("result")
    out.print(f"final reward: {episode['final_reward']}  finished: {episode['finished']}")
    out.print(f"usage: {json.dumps(episode.get('usage'))}")
    for finding in hacking_findings(episode):
        out.print(f"reward hacking: {finding}", markup=False)


@app.command()
def export(
    db: DbOption = None,
    format: Annotated[str, typer.Option(help="jsonl or parquet")] = "jsonl",
    output: Annotated[
        Path | None, typer.Option(help="file to write; jsonl may go to stdout")
    ] = None,
) -> None:
    """Every episode with its calls: one JSON object a line, or a Parquet table with a
    row per episode (calls as a list; JSON fields as JSON text)."""
    from orsbox.monitoring.episodes import every_episode

    if format not in ("jsonl", "parquet"):
        raise typer.BadParameter("jsonl or parquet", param_hint="--format")
    with _open(db) as conn:
        episodes = list(every_episode(conn))
    if format == "jsonl":
        lines = "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in episodes)
        if output is None:
            sys.stdout.write(lines)
        else:
            output.write_text(lines)
    else:
        if output is None:
            raise typer.BadParameter("parquet needs --output FILE", param_hint="--output")
        write_parquet(episodes, output)
    if output is not None:
        out.print(f"wrote {len(episodes)} episode(s) to {output}")


def write_parquet(episodes: list[dict[str, Any]], path: Path) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise typer.BadParameter(
            "Parquet export needs pyarrow: pip install 'orsbox[parquet]'", param_hint="--format"
        ) from None
    rows = [_flat(e) for e in episodes]
    pq.write_table(pa.Table.from_pylist(rows, schema=parquet_schema(pa)), path)


def parquet_schema(pa: Any) -> Any:
    """The export's schema (built once pyarrow is imported: it is optional)."""
    call = pa.struct(
        [
            ("seq", pa.int64()), ("tool", pa.string()), ("input", pa.string()),
            ("output", pa.string()), ("outcome", pa.string()), ("reward", pa.float64()),
            ("finished", pa.bool_()), ("duration_s", pa.float64()), ("error", pa.string()),
            ("started_at", pa.float64()),
        ]
    )  # fmt: skip
    return pa.schema(
        [
            ("id", pa.string()), ("session_id", pa.string()), ("environment", pa.string()),
            ("task", pa.string()), ("prompt", pa.string()), ("started_at", pa.float64()),
            ("ended_at", pa.float64()), ("state", pa.string()), ("final_reward", pa.float64()),
            ("finished", pa.bool_()), ("error", pa.string()), ("usage", pa.string()),
            ("calls", pa.list_(call)),
        ]
    )  # fmt: skip


def _flat(episode: dict[str, Any]) -> dict[str, Any]:
    """JSON-valued fields as JSON text: their shapes differ from one environment to the next."""
    row: dict[str, Any] = {k: _as_text(episode.get(k)) for k in ("task", "prompt", "usage")}
    row |= {k: v for k, v in episode.items() if k not in row and k != "calls"}
    row["calls"] = [
        {**c, "input": _as_text(c.get("input")), "output": _as_text(c.get("output"))}
        for c in episode["calls"]
    ]
    return row


def _as_text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _text(value: Any) -> str:
    """The text blocks of a prompt or an output, else its JSON."""
    if isinstance(value, dict) and isinstance(value.get("output"), dict):
        value = value["output"].get("blocks")
    if isinstance(value, list):
        texts = [b["text"] for b in value if isinstance(b, dict) and "text" in b]
        if texts:
            return "\n".join(texts)
    return "" if value is None else json.dumps(value, ensure_ascii=False)


def _when(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%m-%d %H:%M:%S")
