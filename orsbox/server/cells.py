"""This server as one cell of a cluster: its cell id, and the ids it mints.

Many orsbox servers ("cells") can stand behind one router (docs/cluster.md). Sessions
live in their cell's memory and containers on its engine, so every request naming a
session must reach the cell that created it. The router holds no session table: each id
says where it lives. Session ids are `<uuid4>.<cell>` and sandbox-API ids
`sbx-<hex>.<cell>`; the cell is a DNS label (`[a-z0-9-]`, at most 63), so a router reads
it with one regular expression (`CELL_OF_ID`) and, in Kubernetes or Compose, can resolve
it as a host name.

A request that reaches the wrong cell anyway gets 421 Misdirected Request naming the
cell that owns the session, never another session's state. Ids without a cell part
(clients that make up their own) belong to whichever cell they reach.
"""

from __future__ import annotations

import re
import socket
import uuid

from orsbox.errors import Misdirected

CELL_PATTERN = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
CELL = re.compile(CELL_PATTERN)
# What a router applies to X-Session-ID: group 1 is the cell (the HAProxy and nginx
# configurations in deploy/ spell the same expression).
CELL_OF_ID = re.compile(rf"^[A-Za-z0-9-]+\.({CELL_PATTERN})$")


def default_cell() -> str:
    """The host name as a DNS label: the pod name in a Kubernetes StatefulSet
    (`orsbox-0`), the container's in Compose, the machine's otherwise."""
    host = socket.gethostname().split(".")[0].lower()
    label = re.sub(r"[^a-z0-9-]+", "-", host).strip("-")[:63].strip("-")
    return label or "cell"


def check_cell(name: str) -> str:
    """`name` if it is a valid cell id; ValueError saying what one looks like."""
    if not CELL.fullmatch(name):
        raise ValueError(
            f"cell id {name!r} must be a DNS label: lower-case letters, digits and "
            "hyphens, at most 63, not starting or ending with a hyphen"
        )
    return name


def mint(cell: str, prefix: str = "") -> str:
    """A new id owned by `cell`: 122 random bits (uuid4), then the cell."""
    random_part = uuid.uuid4().hex if prefix else str(uuid.uuid4())
    return f"{prefix}{random_part}.{cell}"


def cell_of(sid: str) -> str | None:
    """The cell an id names, or None for an id without one."""
    match = CELL_OF_ID.match(sid)
    return match[1] if match else None


def check_owned(sid: str, cell: str, what: str = "session") -> None:
    """421 if `sid` names another cell: the router (or the client) sent it astray."""
    owner = cell_of(sid)
    if owner is not None and owner != cell:
        raise Misdirected(
            f"{what} {sid!r} belongs to cell {owner!r}, and this is cell {cell!r}: "
            "send requests through the cluster's router, which routes by X-Session-ID"
        )
