"""The router in front of the cells: a stock HAProxy (Debian 12 ships 2.6), configured.

Three backends over the same cells, because placement and pinning want opposite retry
rules (docs/cluster.md):

* `placement` gets every request without a cell in `X-Session-ID` (`/create_session`,
  `/create_sandbox`, discovery, `/health`): `balance leastconn` over the cells that pass
  their health check, and a cell that answers 503 (full) or refuses the connection is
  retried on another (`retry-on` + `option redispatch 1`).
* `by-image` gets the requests without a cell in `X-Session-ID` that carry
  `X-Orsbox-Image` (a client naming its session's image on `/create_session`):
  consistent hashing on the image, so its sessions share a cell and one pull; a full
  cell (its `/health?room=1` answers 503) leaves the ring until it has room, and a 503
  meanwhile is retried on another cell.
* `pinned` gets every request whose `X-Session-ID` names a cell (`<id>.<cell>`, read
  with the regular expression of `orsbox.server.cells.CELL_OF_ID`): `use-server` picks
  the server named like the cell, `force-persist` keeps it there even when it is down,
  and no redispatch ever moves it, so a session's requests, its reconnects by
  `task_id` included, reach its own cell or fail: when the cell is down the router
  answers 410 with an ORS error body (`CELL_GONE`). An id naming a cell the router does
  not know goes to some live cell, which answers 421 naming the owner.

Responses are streamed as they come (HAProxy buffers no response body), so SSE events
and keep-alive comments pass at once; `timeout server` is longer than the cells'
keep-alive interval. The router holds no session table: a cell is one `server` line in
each backend (written by `render`), or in Kubernetes a DNS name the resolvers find.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

# What HAProxy answers itself, in the ORS error form ({"detail": ...}), never HTML.
CELL_GONE = (
    "the cell that held this session is down or unreachable, and its sessions with it; "
    "start a new session"
)
NO_CELL = "no cell of this cluster is available; retry shortly"
NO_CELL_RETRY_AFTER_S = 5
# What a client sets on /create_session to have its session placed by image (lower case:
# HAProxy compares header names case-insensitively, and this is how it writes them).
IMAGE_HEADER = "x-orsbox-image"
SESSION_ID_WITH_CELL = r"^[A-Za-z0-9-]+\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"


@dataclass(frozen=True)
class CellAddress:
    """A cell as the router sees it: its id (the server's name) and where it listens
    (`host:port`, a DNS name in Kubernetes)."""

    cell: str
    address: str


RESOLV_CONF = "resolv.conf"  # RouterOptions.nameserver: the pod's or container's own


@dataclass(frozen=True)
class RouterOptions:
    bind: str = "127.0.0.1:8080"
    check_interval: str = "1s"
    # A DNS `resolvers` section (Kubernetes, Compose): cells are names it resolves, and
    # a cell not yet resolvable waits in maintenance until it is (`init-addr none`).
    nameserver: str | None = None
    stats_socket: str | None = None


def render(cells: list[CellAddress], errors_dir: Path, options: RouterOptions) -> str:
    """The whole haproxy.cfg. `errors_dir` holds the error answers (`write_errors`)."""
    resolve = " resolvers dns init-addr none" if options.nameserver else ""
    check = f"check inter {options.check_interval} fall 2 rise 1{resolve}"
    servers = "\n".join(f"    server {c.cell} {c.address} {check}" for c in cells)
    stats = f"    stats socket {options.stats_socket} mode 600\n" if options.stats_socket else ""
    resolvers = ""
    if options.nameserver:
        source = (
            "parse-resolv-conf"
            if options.nameserver == RESOLV_CONF
            else f"nameserver dns {options.nameserver}"
        )
        resolvers = f"resolvers dns\n    {source}\n    hold valid 5s\n    hold nx 5s\n\n"
    return f"""# orsbox cluster router (orsbox.cluster.router; docs/cluster.md). HAProxy >= 2.6.
global
    log stderr format raw local0 warning
    maxconn 4096
{stats}
defaults
    mode http
    log global
    option httplog
    timeout connect 2s
    timeout client 120s
    timeout server 120s
    timeout http-request 30s
    timeout http-keep-alive 60s
    timeout queue 5s
    retries 3
    default-server maxconn 2000

{resolvers}frontend orsbox
    bind {options.bind}
    # A session or sandbox id names its cell after its last dot (orsbox.server.cells).
    acl pinned req.hdr(x-session-id) -m reg {SESSION_ID_WITH_CELL}
    http-request set-var(txn.cell) req.hdr(x-session-id),regsub('^[A-Za-z0-9-]+\\.',) if pinned
    # A new session whose client names its image: to the cell that image hashes to.
    http-request set-var(txn.image) req.hdr({IMAGE_HEADER}) if !pinned
    use_backend pinned if pinned
    use_backend by-image if {{ var(txn.image) -m found }}
    default_backend placement

backend placement
    # New sessions, sandboxes and discovery: the least busy live cell; a full cell's 503
    # (or a refused connection) is retried on another cell.
    balance leastconn
    option httpchk GET /health
    http-check expect status 200
    retry-on 503 conn-failure empty-response
    option redispatch 1
    errorfile 503 {errors_dir}/no-cell.http
{servers}

backend by-image
    # New sessions naming their image (`{IMAGE_HEADER}`): consistent hashing on the
    # image, so all sessions of one image go to one cell, which pulls it once, and a
    # cell joining or leaving moves only its share of the images. A full cell's 503 (or
    # a refused connection) is retried on the next cell of the ring.
    balance hash var(txn.image)
    hash-type consistent
    # A full cell fails this check (503) and leaves the ring until it has room again, so
    # its images' new sessions go on to the next cell; a 503 before the check notices
    # is retried there too. (HAProxy's hash-balance-factor bounds requests in flight, not
    # sessions: a session holds no connection between calls.)
    option httpchk GET /health?room=1
    http-check expect status 200
    retry-on 503 conn-failure empty-response
    option redispatch 1
    errorfile 503 {errors_dir}/no-cell.http
{servers}

backend pinned
    # A session's cell and no other, even when it is down; then 410 in the ORS form.
    option persist
    force-persist if TRUE
    use-server %[var(txn.cell)] if TRUE
    no option redispatch
    # A refused connection means the cell's process is gone, and its sessions with it:
    # one quick retry (its turn-around is min(timeout connect, 1 s)), then 410.
    retries 1
    timeout connect 500ms
    retry-on conn-failure empty-response
    option httpchk GET /health
    http-check expect status 200
    errorfile 503 {errors_dir}/cell-gone.http
{servers}
"""


def write_errors(errors_dir: Path) -> None:
    """The router's own answers, as raw HTTP responses HAProxy sends verbatim."""
    errors_dir.mkdir(parents=True, exist_ok=True)
    answers = {
        "cell-gone.http": ("410 Gone", CELL_GONE, {}),
        "no-cell.http": (
            "503 Service Unavailable",
            NO_CELL,
            {"retry-after": str(NO_CELL_RETRY_AFTER_S)},
        ),
    }
    for name, (status, detail, extra) in answers.items():
        body = json.dumps({"detail": detail}) + "\n"
        headers = {
            "content-type": "application/json",
            "content-length": str(len(body)),
            "cache-control": "no-cache",
            "connection": "close",
            "x-orsbox-router": "haproxy",
            **extra,
        }
        head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        (errors_dir / name).write_text(f"HTTP/1.1 {status}\r\n{head}\r\n{body}")


# -- the shipped configurations (deploy/) ------------------------------------------------
SHIPPED_ERRORS_DIR = Path("/usr/local/etc/haproxy")  # where deploy/ mounts the error files


def kubernetes_config(cells: int = 8) -> str:
    """deploy/kubernetes/haproxy.cfg: StatefulSet pods `orsbox-0`... behind the headless
    Service `orsbox-cells` in namespace `orsbox`. Names not resolvable yet (a cell not
    scaled up) wait in maintenance; growing past `cells` is one line per backend."""
    addresses = [
        CellAddress(f"orsbox-{i}", f"orsbox-{i}.orsbox-cells.orsbox.svc.cluster.local:8080")
        for i in range(cells)
    ]
    options = RouterOptions(bind=":8080", nameserver=RESOLV_CONF)
    return render(addresses, SHIPPED_ERRORS_DIR, options)


def compose_config(cells: int = 3) -> str:
    """deploy/compose/haproxy.cfg: Compose services `cell-1`... (their host names)."""
    addresses = [CellAddress(f"cell-{i}", f"cell-{i}:8080") for i in range(1, cells + 1)]
    options = RouterOptions(bind=":8080", nameserver=RESOLV_CONF)
    return render(addresses, SHIPPED_ERRORS_DIR, options)


if __name__ == "__main__":  # python -m orsbox.cluster.router kubernetes|compose DIR
    import sys

    kind, folder = sys.argv[1], Path(sys.argv[2])
    config = {"kubernetes": kubernetes_config, "compose": compose_config}[kind]()
    (folder / "haproxy.cfg").write_text(config)
    write_errors(folder)
