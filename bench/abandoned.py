"""Sessions a trainer abandons: N real `openreward` clients (what TRL's adapter is
built on) each hold a session of the bundled `coding` environment (a container each)
and never call a tool; all are killed with SIGKILL (no /delete, no more pings). The
figure is the time from the kill until each container is gone, against the server's
defaults (`session_lease_s` 60, `reap_interval_s` 5), or `--lease S`.

    python -m bench.abandoned [N] [--lease S]

Without the lease (`--lease 0`) the same sessions live for the inactivity timeout,
900 s, after the clients' last ping; that is not waited for here."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import docker

from bench.servers import ROOT, free_port, spawn_server, stop_process, wait_healthy

HOLDER = """
import threading
from openreward import OpenReward

env = OpenReward(api_key="k").environments.get("coding")
session = env.session(split="train", index=0).__enter__()
session.get_prompt()
print(session.sid, flush=True)
threading.Event().wait()  # a model thinking, for ever; the client pings every 10 s
"""
SESSION_LABEL = "orsbox.session"
GIVE_UP_S = 300.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("clients", type=int, nargs="?", default=4)
    parser.add_argument("--lease", type=float, default=None)
    args = parser.parse_args()
    settings = {} if args.lease is None else {"session_lease_s": args.lease}
    engine = docker.from_env()
    with tempfile.TemporaryDirectory(prefix="orsbox-bench-abandoned-") as folder:
        port = free_port()
        log = Path(folder) / "server.log"
        argv = ["-m", "orsbox.cli.main", "serve", "coding", "--port", str(port)]
        server = spawn_server(argv, log, ROOT, **settings)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_healthy(url, server, log, 60)
            gone = _abandon(url, args.clients, Path(folder), engine)
        finally:
            stop_process(server)
    lease = "default (60 s)" if args.lease is None else f"{args.lease:g} s"
    print(f"{args.clients} clients killed, lease {lease}: containers gone after (s):", gone)


def _abandon(url: str, n: int, folder: Path, engine: docker.DockerClient) -> list[float]:
    script = folder / "holder.py"
    script.write_text(HOLDER)
    env = {**os.environ, "OPENREWARD_SESSION_URL": url}
    holders = [
        subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env)
        for _ in range(n)
    ]
    sids = [h.stdout.readline().strip() for h in holders if h.stdout]

    def alive(sid: str) -> bool:
        return bool(engine.api.containers(filters={"label": f"{SESSION_LABEL}={sid}"}))

    assert all(alive(s) for s in sids), "every client holds a container"
    killed = time.monotonic()
    for holder in holders:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    gone: dict[str, float] = {}
    while len(gone) < n and time.monotonic() - killed < GIVE_UP_S:
        for sid in sids:
            if sid not in gone and not alive(sid):
                gone[sid] = round(time.monotonic() - killed, 1)
        time.sleep(0.5)
    return sorted(gone.values())


if __name__ == "__main__":
    main()
