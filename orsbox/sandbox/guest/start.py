"""Starting guests, for any backend: the main guest's greeting and the sub-guests of
`exec(user=...)`.

A backend starts the loader (`loader.guest_argv()`) as the sandbox's own command and
hands over a socket carrying its stdin and stdout; `start_guest` sends the payload
and says hello. For a sub-guest the backend supplies only how to start a process in
the sandbox as a user (`StartAs`, Docker: `docker exec`); `SubGuests` does the rest.
The payload goes to each sandbox once: at a sandbox's first sub-guest the main guest
is asked to keep a copy (`inside/keep.py`), and every sub-guest loads that copy,
checked against the payload's digest, instead of receiving it again.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Awaitable, Callable

from orsbox.errors import SandboxError, SandboxStartError
from orsbox.sandbox.guest.channel import ChannelClosed, Demux, GuestChannel
from orsbox.sandbox.guest.loader import Kept, guest_argv
from orsbox.sandbox.guest.payload import guest_payload
from orsbox.sandbox.guest.sandbox import check
from orsbox.sandbox.guest.sleeper import sleeper_binary

log = logging.getLogger("orsbox.sandbox.agent")  # the name operators filter on; kept

GUEST_HELLO_TIMEOUT_S = 30.0  # python start in a sandbox under a start burst
KEEP_TIMEOUT_S = 10.0

StartAs = Callable[[list[str], str], Awaitable[socket.socket]]  # argv, user -> its socket


async def start_guest(
    sock: socket.socket,
    name: str,
    *,
    on_lost: Callable[[], None] | None = None,
    demux: Demux | None = None,
    memory: dict[str, int | None] | None = None,
    sleep_after_s: float | None = None,
) -> GuestChannel:
    """The main guest on `sock`: send it the payload, say hello; it starts its
    persistent shell just after. `memory`: its memory bounds (the RLIMIT_AS it gives
    each command, the memory in use past which it kills), from the backend;
    `sleep_after_s`: how long it may idle before it sleeps (`inside/sleep.py`)."""
    hello: dict[str, float | int | str | None] = {**(memory or {}), "sleep_after": sleep_after_s}
    sleeper = b""
    if sleep_after_s is not None:  # the digest its kept copy must have when it wakes
        hello["digest"] = guest_payload().digest
        sleeper = sleeper_binary() or b""  # what it sleeps as (none: a waiting bash)
    return await greet(
        sock, name, on_lost, demux, send_payload=True, shell=True, options=hello, sleeper=sleeper
    )


async def greet(
    sock: socket.socket,
    name: str,
    on_lost: Callable[[], None] | None,
    demux: Demux | None,
    *,
    send_payload: bool,
    shell: bool,
    options: dict[str, float | int | str | None] | None = None,
    sleeper: bytes = b"",
    last_words: list[str] | None = None,
) -> GuestChannel:
    """Connect to a guest's loader, send it the payload unless it loads a kept copy,
    and wait for its hello. With `shell`, the guest starts its persistent shell just
    after (a sub-guest runs one exec, no shell); `options`, the hello's others (memory
    bounds, `sleep_after`); `sleeper`, the native sleeper's executable, as the hello's
    payload (`sleeper/`); `last_words`, filled with what the guest wrote to stderr
    when it ends before its hello (why it could not start)."""
    try:
        channel = await GuestChannel.connect(sock, name, on_lost, demux)
    except BaseException:
        sock.close()
        raise
    hello = {"op": "hello", "shell": shell, **(options or {})}
    try:
        if send_payload:
            await channel.send_raw(guest_payload().data)
        header, _ = await channel.request(hello, sleeper, timeout_s=GUEST_HELLO_TIMEOUT_S)
        check(header)
    except TimeoutError:
        channel.close()
        raise SandboxStartError(f"the sandbox guest in {name} did not answer") from None
    except BaseException:
        channel.close()
        if last_words is not None:
            last_words[:] = channel.last_words
        raise
    return channel


class SubGuests:
    """The sub-guests of one sandbox: `open(user)` starts one as `user` and greets it.

    The first asks the main guest to keep the payload (`keep`), later ones reuse the
    copy. A sub-guest whose loader finds the copy missing or changed (a command of the
    sandbox's user removed or rewrote it) ends at once; it is started again with the
    payload sent, and the next sub-guest asks for a fresh copy."""

    def __init__(
        self,
        main: GuestChannel,
        name: str,
        start_as: StartAs,
        demux: Callable[[], Demux | None] = lambda: None,
    ) -> None:
        self._main = main
        self._name = name
        self._start_as = start_as
        self._demux = demux
        self._kept: Kept | None = None
        self._python = "python3"  # the main guest's, once `keep` has said it
        self._keeping = asyncio.Lock()
        self.payloads_sent = 0  # how many sub-guests were sent the payload (for tests, bench)

    async def open(self, user: str) -> GuestChannel:
        kept = await self._kept_copy()
        first_words: list[str] = []
        if kept is not None:
            try:
                return await self._open(user, kept, first_words)
            except ChannelClosed:
                if self._kept == kept:
                    self._kept = None
                log.info("%s: the kept guest was refused; sending it to this sub-guest", self._name)
        last_words: list[str] = []
        try:
            return await self._open(user, None, last_words)
        except ChannelClosed:
            # The engine does not always say why (Docker 20.10 under load closes a
            # refused exec's stream with nothing written). The first try's words come
            # after the passwd check: they may be the loader's own, of a kept copy
            # missing or changed, which is not why the second try failed.
            words = last_words or await self._missing_user(user) or first_words
            why = f": {'; '.join(words)}" if words else ""
            raise SandboxError(
                f"could not run a command as user {user!r} in {self._name}{why}"
            ) from None

    async def _open(
        self, user: str, kept: Kept | None, last_words: list[str] | None = None
    ) -> GuestChannel:
        """Start and greet one sub-guest; `last_words` gets what it wrote to stderr
        before it ended, when it ends before its hello."""
        sock = await self._start_as(guest_argv(sub=True, kept=kept, python=self._python), user)
        channel = await greet(
            sock,
            f"{self._name}[{user}]",
            None,
            self._demux(),
            send_payload=kept is None,
            shell=False,
            last_words=last_words,
        )
        if kept is None:
            self.payloads_sent += 1
        return channel

    async def _missing_user(self, user: str) -> list[str]:
        """Why a start as `user` failed when the engine did not say: a user named by a
        name the sandbox's /etc/passwd lacks (a numeric uid needs no entry)."""
        name = user.partition(":")[0]
        if not name or name.isdigit() or not self._main.open:
            return []
        try:
            header, passwd = await self._main.request(
                {"op": "read", "path": "/etc/passwd", "max": 1 << 20}, timeout_s=KEEP_TIMEOUT_S
            )
        except (ChannelClosed, TimeoutError):
            return []
        if not header.get("ok"):
            return []
        names = {line.split(":", 1)[0] for line in passwd.decode(errors="replace").splitlines()}
        if name in names:
            return []
        return [f"unable to find user {name}: no entry in the sandbox's /etc/passwd"]

    async def _kept_copy(self) -> Kept | None:
        """The main guest's copy of the payload, asked for once (None: it could not
        write one anywhere, or it did not answer; the payload is then sent)."""
        async with self._keeping:
            if self._kept is None and self._main.open:
                try:
                    header, _ = await self._main.request({"op": "keep"}, timeout_s=KEEP_TIMEOUT_S)
                except (ChannelClosed, TimeoutError):
                    return None
                path = header.get("path") if header.get("ok") else None
                if header.get("python"):
                    self._python = str(header["python"])
                if path:
                    self._kept = Kept(str(path), guest_payload().digest)
            return self._kept
