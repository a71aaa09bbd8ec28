"""The status page's HTML: written on the server, no build step, no outside assets.

Pure functions from data to markup; every value passes through `html.escape`. The page
refreshes its live part by fetching `/ui/live` (a fragment) every few seconds with a
small inline script, allowed by a per-response nonce in its Content-Security-Policy.
"""

from __future__ import annotations

import datetime
import json
import time
from html import escape
from typing import Any

from orsbox.monitoring.episodes import hacking_findings
from orsbox.sandbox.image_cache import ImageCacheStats

REFRESH_S = 3

STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse;width:100%}
th,td{border-bottom:1px solid #ddd;padding:.3em .5em;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.n{text-align:right;font-variant-numeric:tabular-nums}
pre{background:#f7f7f7;padding:.6em;white-space:pre-wrap;word-break:break-word;margin:.3em 0}
.call{border:1px solid #ddd;border-radius:4px;padding:.6em;margin:.8em 0}
.muted{color:#777}.bad{color:#b00}.good{color:#070}
"""


def page(title: str, body: str, nonce: str | None = None) -> str:
    script = ""
    if nonce is not None:
        script = (
            f'<script nonce="{nonce}">setInterval(async()=>{{try{{const r=await fetch('
            f'"/ui/live",{{credentials:"same-origin"}});if(r.ok)document.getElementById('
            f'"live").innerHTML=await r.text()}}catch(e){{}}}},{REFRESH_S * 1000})</script>'
        )
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}'
        f"</title><style>{STYLE}</style></head><body>{body}{script}</body></html>"
    )


def csp(nonce: str | None) -> str:
    script = f"'nonce-{nonce}'" if nonce else "'none'"
    return f"default-src 'none'; style-src 'unsafe-inline'; script-src {script}; connect-src 'self'"


def status(
    live: str,
    episodes: list[dict[str, Any]] | None,
    names: list[str],
    images: ImageCacheStats | None = None,
) -> str:
    head = f'<h1>orsbox</h1><p class="muted">serving {escape(", ".join(names))}</p>'
    pulled = pulled_images(images) if images is not None else ""
    return head + f'<div id="live">{live}</div>' + pulled + recent_episodes(episodes)


def pulled_images(stats: ImageCacheStats) -> str:
    """The images this server pulled: pulls, cache hits, the disk and its budget."""
    budget = "unbounded" if stats.budget_bytes is None else _bytes(stats.budget_bytes)
    facts = [
        ("pulls", f"{stats.pulls} ({stats.pull_failures} failed)"),
        ("pulled", _bytes(stats.bytes_pulled)),
        ("cache hits / misses", f"{stats.hits} / {stats.misses}"),
        ("images held", str(stats.images)),
        ("disk used / budget", f"{_bytes(stats.disk_bytes)} / {budget}"),
        ("evictions", str(stats.evictions)),
        ("last evicted", ", ".join(stats.evicted[-5:]) or "-"),
    ]
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in facts)
    return f'<h2>Pulled images</h2><table id="images">{rows}</table>'


def live_sessions(sessions: list[dict[str, Any]]) -> str:
    if not sessions:
        return '<h2>Live sessions</h2><p class="muted" id="no-sessions">No live sessions.</p>'
    rows = "".join(
        f'<tr class="session"><td title="{escape(s["sid"])}">{escape(s["sid"][:8])}</td>'
        f"<td>{escape(s['environment'])}</td><td>{escape(_short(s['task'], 60))}</td>"
        f'<td class="n">{_duration(s["usage"]["wall_s"])}</td><td>{escape(s["state"])}</td>'
        f'<td class="n idle">{_duration(s.get("idle_s"))}</td>'
        f'<td class="n">{_duration(s.get("last_ping_s"))}</td>'
        f'<td class="n">{escape(str(s["usage"]["calls"]))}</td><td class="n">{_cpu(s["usage"]["cpu_s"])}</td>'
        f'<td class="n">{_bytes(s["usage"]["peak_memory_bytes"])}</td>'
        f'<td class="n">{_bytes(s["usage"]["output_bytes"])}</td>'
        f"<td>{escape(s['container'] or '-')}</td></tr>"
        for s in sessions
    )
    header = _header(
        "session environment task age state idle last&nbsp;ping calls CPU peak&nbsp;memory "
        "output container"
    )
    return f"<h2>Live sessions ({len(sessions)})</h2><table>{header}{rows}</table>"


def recent_episodes(episodes: list[dict[str, Any]] | None) -> str:
    if episodes is None:
        return '<h2>Recent episodes</h2><p class="muted">Episode recording is off.</p>'
    if not episodes:
        return '<h2>Recent episodes</h2><p class="muted">No episodes recorded yet.</p>'
    rows = "".join(
        f'<tr class="episode"><td><a href="/ui/episodes/{escape(e["id"])}">{escape(e["id"][:12])}</a></td>'
        f"<td>{escape(e['environment'])}</td><td>{_when(e['started_at'])}</td>"
        f'<td class="n">{_duration((e["ended_at"] or time.time()) - e["started_at"])}</td>'
        f"<td>{_state(e)}</td>"
        f'<td class="n">{escape(str(e["calls"]))}</td><td class="n">{_reward(e["final_reward"])}</td><td>{"yes" if e["finished"] else "no"}</td></tr>'
        for e in episodes
    )
    header = _header("episode environment started duration state calls reward finished")
    return f"<h2>Recent episodes</h2><table>{header}{rows}</table>"


def transcript(episode: dict[str, Any]) -> str:
    usage = episode.get("usage") or {}
    facts = [
        ("environment", episode["environment"]),
        ("session", episode["session_id"]),
        ("started", _when(episode["started_at"])),
        ("state", episode["state"]),
        *([("grading error", episode["grading_cause"])] if episode.get("grading_cause") else []),
        ("final reward", _reward(episode["final_reward"])),
        ("finished", "yes" if episode["finished"] else "no"),
        ("CPU", _cpu(usage.get("cpu_s"))),
        ("peak memory", _bytes(usage.get("peak_memory_bytes"))),
        ("wall time", _duration(usage.get("wall_s"))),
    ]
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(str(v))}</td></tr>" for k, v in facts)
    parts = [
        '<p><a href="/">&larr; status</a></p>',
        f"<h1>Episode {escape(episode['id'][:12])}</h1><table>{rows}</table>",
    ]
    if episode.get("error"):
        parts.append(f'<p class="bad">{escape(str(episode["error"]))}</p>')
    findings = hacking_findings(episode)
    if findings:
        items = "".join(f"<li>{escape(f)}</li>" for f in findings)
        parts.append(f'<h2>Reward hacking</h2><ul id="reward-hacking" class="bad">{items}</ul>')
    parts.append(f"<h2>Task</h2><pre>{escape(_json(episode.get('task')))}</pre>")
    parts.append(f'<h2>Prompt</h2><div id="prompt">{_blocks(episode.get("prompt"))}</div>')
    parts.append(f"<h2>Calls ({len(episode['calls'])})</h2>")
    parts += [_call(c) for c in episode["calls"]]
    return "".join(parts)


def _call(call: dict[str, Any]) -> str:
    outcome_class = "good" if call["outcome"] == "ok" else "bad"
    head = (
        f"<b>#{escape(str(call['seq']))} {escape(call['tool'])}</b> "
        f'<span class="{outcome_class}">{escape(call["outcome"])}</span> '
        f'<span class="muted">{_duration(call["duration_s"])}'
        f" · reward {_reward(call['reward'])} · finished {'yes' if call['finished'] else 'no'}</span>"
    )
    body = f"<div>input</div><pre>{escape(_json(call.get('input')))}</pre>"
    output = call.get("output")
    if isinstance(output, dict) and isinstance(output.get("output"), dict):
        body += f"<div>output</div>{_blocks(output['output'].get('blocks'))}"
    elif isinstance(output, dict) and "error" in output:
        body += f'<div>error</div><pre class="bad">{escape(str(output["error"]))}</pre>'
    if call.get("error"):
        body += f'<div>error</div><pre class="bad">{escape(str(call["error"]))}</pre>'
    return f'<div class="call">{head}{body}</div>'


def _blocks(blocks: Any) -> str:
    """Text blocks as text, messages as role + blocks, anything else as JSON."""
    if isinstance(blocks, str):
        try:
            blocks = json.loads(blocks)
        except ValueError:
            return f"<pre>{escape(blocks)}</pre>"
    if not isinstance(blocks, list):
        return f"<pre>{escape(_json(blocks))}</pre>"
    out = []
    for block in blocks:
        if isinstance(block, dict) and "role" in block:  # a message
            out.append(f"<div class='muted'>{escape(str(block['role']))}</div>")
            out.append(_blocks(block.get("content", block.get("blocks"))))
        elif isinstance(block, dict) and block.get("type") == "text":
            out.append(f"<pre>{escape(str(block.get('text', '')))}</pre>")
        else:
            out.append(f"<pre>{escape(_json(block))}</pre>")
    return "".join(out) or '<p class="muted">(none recorded)</p>'


def _header(names: str) -> str:
    return "<tr>" + "".join(f"<th>{n}</th>" for n in names.split()) + "</tr>"


def _json(value: Any) -> str:
    if value is None:
        return "(none)"
    return value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)


def _short(text: str | None, limit: int) -> str:
    text = text or "-"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.1f} min"


def _cpu(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.2f} s"


def _bytes(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.2f} GiB"


def _state(episode: dict[str, Any]) -> str:
    """The episode's state; a grading error (the grader could not run: no reward) in
    red with its cause, so it is not read as an agent's failure."""
    cause = episode.get("grading_cause")
    if not cause:
        return escape(episode["state"])
    return f'<span class="bad">{escape(episode["state"])} ({escape(cause)})</span>'


def _reward(reward: float | None) -> str:
    return "-" if reward is None else f"{reward:g}"
