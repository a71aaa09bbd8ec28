"""Test hosts a sandbox is tried against, all on this machine: an HTTP server on a host
address, one in a network namespace the test creates (with an address in a private
range, reached through the host's routing as an internal mirror would be), and the probe
a sandbox runs to try a URL."""

from __future__ import annotations

import contextlib
import http.server
import secrets
import shlex
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

PROBE_TIMEOUT_S = 3.0
READY_TIMEOUT_S = 15.0

PROBE = """
import sys, time, urllib.request, urllib.error, socket
url, retries = sys.argv[1], int(sys.argv[2])
for attempt in range(retries + 1):
    try:
        with urllib.request.urlopen(url, timeout={timeout}) as answer:
            print(answer.status)
        break
    except urllib.error.HTTPError as e:
        print(e.code)
        break
    except (socket.timeout, TimeoutError):
        print("timeout")
        break
    except urllib.error.URLError as e:
        if isinstance(e.reason, (socket.timeout, TimeoutError)):
            print("timeout")
            break
        if attempt == retries:
            print("error:", e.reason)
        else:
            time.sleep(0.1)
"""


def probe(url: str, retries: int = 0) -> str:
    """A shell command printing the HTTP status of `url`, "timeout" when no answer comes
    (a dropped packet), or "error: ..." (refused, unreachable). `retries`: tries again
    on a refused connection, for a server still starting."""
    code = PROBE.format(timeout=PROBE_TIMEOUT_S)
    return f"python3 -c {shlex.quote(code)} {shlex.quote(url)} {retries}"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def serve_http(address: str) -> Iterator[int]:
    """An HTTP server on `address` (a free port, returned) for the block's duration."""
    server = http.server.ThreadingHTTPServer((address, 0), _Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@dataclass
class NamespaceHost:
    """An HTTP server in a network namespace of its own, joined to the host by a veth
    pair: the host has `.1`, the namespace `.2` of a /30 in 10.213.0.0/16."""

    namespace: str
    cidr: str
    address: str
    port: int
    process: subprocess.Popen[bytes]

    @classmethod
    @contextlib.contextmanager
    def create(cls, port: int = 8080) -> Iterator[NamespaceHost]:
        tag = secrets.token_hex(3)
        namespace, host_end, ns_end = f"orsboxt-{tag}", f"ovt{tag}h", f"ovt{tag}n"
        third, fourth = secrets.randbelow(256), 4 * secrets.randbelow(64)
        base = f"10.213.{third}"
        cidr, host_ip, ns_ip = f"{base}.{fourth}/30", f"{base}.{fourth + 1}", f"{base}.{fourth + 2}"
        _ip("netns", "add", namespace)
        process: subprocess.Popen[bytes] | None = None
        try:
            _ip("link", "add", host_end, "type", "veth", "peer", "name", ns_end)
            _ip("link", "set", ns_end, "netns", namespace)
            _ip("addr", "add", f"{host_ip}/30", "dev", host_end)
            _ip("link", "set", host_end, "up")
            inside = ["netns", "exec", namespace, "ip"]
            _ip(*inside, "addr", "add", f"{ns_ip}/30", "dev", ns_end)
            _ip(*inside, "link", "set", ns_end, "up")
            _ip(*inside, "link", "set", "lo", "up")
            _ip(*inside, "route", "add", "default", "via", host_ip)
            process = subprocess.Popen(
                ["ip", "netns", "exec", namespace, "python3", "-m", "http.server",
                 str(port), "--bind", ns_ip],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            _wait_answers(f"http://{ns_ip}:{port}/")
            yield cls(namespace, cidr, ns_ip, port, process)
        finally:
            if process is not None:
                process.kill()
                process.wait()
            subprocess.run(["ip", "link", "del", host_end], capture_output=True)
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True)


def _wait_answers(url: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
