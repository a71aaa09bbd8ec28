"""The egress proxy of an allow-listed sandbox: a stock squid (Debian's `squid`
package), one process per sandbox, started and stopped by orsbox.

Why squid: its `dstdomain -n` ACL matches the name a client asks for as written, so a
name off the list is refused (403) before any DNS lookup is made for it, and its
`hosts_file` lets an operator (or a test) resolve names to hosts of their own. Each
proxy listens only on the allow-list network's gateway address, on a port of its own,
and answers only its sandbox's address (`src`): another sandbox on the network cannot
use its list. Allowed names that resolve to the host's own, private or link-local
addresses are refused too (`dst`, looked up only once the name is on the list), unless
the operator's `egress_allow` CIDRs name them: squid runs on the host, outside the
egress guard's rules, so it applies them itself.

The process runs in the foreground (`squid -N`), tracked by its `Popen`; its config, pid
file, logs and owner (the server, as container labels name it) live in a temporary
folder removed when it stops. A server killed with SIGKILL leaves its proxies running;
`sweep_proxies` (the next server's startup sweep, `orsbox gc`) kills those whose owner
certainly died, by the pid in their folder. Its access log is kept
for the caller to read (`access_log`), e.g. to say why a request was refused.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from orsbox.errors import SandboxError
from orsbox.sandbox.host import owner as L
from orsbox.sandbox.host.egress import BLOCKED, parse_cidrs

log = logging.getLogger("orsbox.sandbox.host.proxy")

SQUID = "squid"
FOLDER_PREFIX = "orsbox-proxy-"
OWNER_FILE = "owner.json"
READY_TIMEOUT_S = 20.0
PROXY_USER = "proxy"  # Debian's squid drops to it when started as root


def squid_binary() -> str:
    found = shutil.which(SQUID) or shutil.which(SQUID, path="/usr/sbin:/sbin")
    if found is None:
        raise SandboxError(
            "an allow-listed network needs the squid proxy on the host "
            "(Debian: apt-get install squid); it is not installed"
        )
    return found


def squid_domains(hosts: Sequence[str]) -> list[str]:
    """`allowed_hosts` as squid's dstdomain values: "*.example.org" is ".example.org"."""
    return [f".{h[2:]}" if h.startswith("*.") else h for h in hosts]


def squid_config(
    folder: Path,
    listen: str,
    port: int,
    client: str,
    hosts: Sequence[str],
    allow_cidrs: Sequence[str],
    blocked: Sequence[str],
    hosts_file: str | None,
) -> str:
    """The whole squid.conf of one sandbox's proxy."""
    lines = [
        f"http_port {listen}:{port}",
        f"pid_filename {folder}/squid.pid",
        f"cache_log {folder}/cache.log",
        f"access_log stdio:{folder}/access.log squid",
        f"coredump_dir {folder}",
        "cache deny all",
        "via off",
        "forwarded_for delete",
        "httpd_suppress_version_string on",
        "shutdown_lifetime 0 seconds",
        f"acl sandbox src {client}/32",
    ]
    if hosts_file:
        lines.append(f"hosts_file {hosts_file}")
    if hosts:
        lines.append(f"acl listed dstdomain -n {' '.join(squid_domains(hosts))}")
        if allow_cidrs:
            lines.append(f"acl operator_allowed dst {' '.join(allow_cidrs)}")
            lines.append("http_access allow sandbox listed operator_allowed")
        lines.append(f"acl guarded dst {' '.join(blocked)}")
        lines.append("http_access allow sandbox listed !guarded")
    lines.append("http_access deny all")
    return "\n".join(lines) + "\n"


def free_port(address: str) -> int:
    with socket.socket() as sock:
        sock.bind((address, 0))
        return int(sock.getsockname()[1])


class EgressProxy:
    """One running squid for one sandbox."""

    def __init__(
        self, process: subprocess.Popen[bytes], folder: Path, listen: str, port: int, client: str
    ) -> None:
        self.process = process
        self.folder = folder
        self.port = port
        self.client = client  # the only address it answers
        self.url = f"http://{listen}:{port}"

    @classmethod
    def start(
        cls,
        listen: str,
        client: str,
        hosts: Sequence[str],
        *,
        allow_cidrs: Sequence[str] = (),
        host_addresses: Sequence[str] = (),
        hosts_file: str | None = None,
        owner: str = "",
    ) -> EgressProxy:
        """Start squid on `listen` (a free port) for `client`, allowing `hosts`; return
        once it accepts connections. `owner`: the server id, written beside it so that
        `sweep_proxies` can tell a dead server's proxy. Raises `SandboxError` with
        squid's log if it does not start."""
        binary = squid_binary()
        folder = Path(tempfile.mkdtemp(prefix=FOLDER_PREFIX))
        (folder / OWNER_FILE).write_text(json.dumps(L.owner_labels(owner)))
        port = free_port(listen)
        blocked = [*BLOCKED["iptables"], *BLOCKED["ip6tables"], *parse_cidrs(host_addresses)]
        if hosts_file is not None:  # a copy squid can read after dropping to its user
            shutil.copyfile(hosts_file, folder / "hosts")
            hosts_file = str(folder / "hosts")
        config = squid_config(
            folder, listen, port, client, hosts, parse_cidrs(allow_cidrs), blocked, hosts_file
        )
        (folder / "squid.conf").write_text(config)
        _hand_to_proxy_user(folder)
        process = subprocess.Popen(
            [binary, "-N", "-f", str(folder / "squid.conf")],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=(folder / "stderr.log").open("wb"),
            start_new_session=True,
        )
        proxy = cls(process, folder, listen, port, client)
        try:
            _wait_listening(process, listen, port, folder)
        except BaseException:
            proxy.stop()
            raise
        log.info("egress proxy for %s on %s (pid %d)", client, proxy.url, process.pid)
        return proxy

    def access_log(self) -> str:
        with contextlib.suppress(OSError):
            return (self.folder / "access.log").read_text(errors="replace")
        return ""

    def stop(self) -> None:
        """Kill squid and the helpers it forks (its process group; it keeps no state
        worth a graceful shutdown, which takes seconds) and remove its folder.
        Idempotent."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


def _hand_to_proxy_user(folder: Path) -> None:
    """Started as root, squid writes its logs as `proxy`."""
    if os.geteuid() != 0:
        return
    with contextlib.suppress(KeyError, OSError):
        for path in (folder, *folder.iterdir()):
            shutil.chown(path, user=PROXY_USER)


def _wait_listening(process: subprocess.Popen[bytes], host: str, port: int, folder: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        if process.poll() is not None:
            raise SandboxError(f"the egress proxy (squid) did not start: {_logs(folder)}")
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=1):
            return
        if time.monotonic() > deadline:
            raise SandboxError(f"the egress proxy (squid) did not listen: {_logs(folder)}")
        time.sleep(0.05)


def _logs(folder: Path) -> str:
    text = ""
    for name in ("stderr.log", "cache.log"):
        with contextlib.suppress(OSError):
            text += (folder / name).read_text(errors="replace")
    return " | ".join(text.strip().splitlines()[-5:]) or "no output"


def sweep_proxies() -> int:
    """Kill the proxies of servers that certainly died and remove their folders."""
    swept = 0
    for folder in Path(tempfile.gettempdir()).glob(f"{FOLDER_PREFIX}*"):
        try:
            owner = json.loads((folder / OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue
        if not L.owner_is_dead(owner):
            continue
        with contextlib.suppress(OSError, ValueError):
            pid = int((folder / "squid.pid").read_text().split()[0])
            if str(folder) in Path(f"/proc/{pid}/cmdline").read_text(errors="replace"):
                os.killpg(pid, signal.SIGKILL)
        shutil.rmtree(folder, ignore_errors=True)
        swept += 1
    return swept
