"""The guest's own code: what runs inside each sandbox (see `orsbox.sandbox.guest`).

One process per sandbox that runs every command for the host. It turns a 54 ms `docker
exec` per call into a sub-millisecond round trip on a socket that stays open. It is
started as `python3 -c <loader>` (`orsbox.sandbox.guest.loader`) and gets this package
as one payload (`orsbox.sandbox.guest.payload`), so the image needs python3 >= 3.7 and
bash, and no file of ours. A sub-guest (`--sub`, to run one command as another user) is
the same loader, started by the backend as that user; it loads the copy the main guest
keeps (`keep.py`) instead of receiving the payload again.

The rules this package keeps, because of where it runs:
  - standard library only, python 3.7 syntax (no `:=`, no annotations), and imports of
    its own modules relative (`from .capture import Capture`): inside the sandbox the
    package is named `orsbox_guest`, not `orsbox.sandbox.guest.inside`;
  - no mutable state at module level: what the guest knows (its memory bounds, the OOM
    counter, the shell) lives in objects made by `serve.main` and passed around;
  - single-threaded: a fork bomb that exhausts the pids limit must not stop the guest
    from sweeping it (a thread is a pid too);
  - light on memory: the guest lives as long as its sandbox, a thousand of them at once
    on one host, so it loads no module that costs much to keep. Measured in python 3.11
    (RssAnon of `python3 -I -S`, each on top of the others): `json` 1.1 MiB (it brings
    `re` and `enum`), `contextlib` 0.9 MiB, `subprocess` 0.8 MiB (with `threading`),
    `selectors` and `collections` 0.6 MiB, `signal` 0.3 MiB (`enum`). Their C cores or
    a few lines here do the guest's part of each: `json_codec`, `quiet`, `spawn`,
    `watch`, `_signal`, `_collections` (tests/sandbox/test_guest_payload.py lists what
    the package loads).

Its modules, one job each: `wire` (framing, reading and writing descriptors),
`json_codec` (the headers' JSON), `watch` (the descriptors the loop waits on), `spawn`
(starting commands), `quiet` (`suppress`), `capture` (bounded output), `processes` (the process table and kill sweeps), `marks`
(what a command's processes carry in their environment), `memory` (OOM counts, gVisor's
memory watch, each command's limits), `shell` (the persistent shell), `one_off` (an
exec outside the shell), `files` (read, write, untar), `keep` (the payload's copy for
sub-guests), `sleep` (an idle guest replaced by a native sleeper, or a waiting bash,
until a request it hands back) and `serve` (the request loop).

Wire format, both directions (host -> guest on stdin, guest -> host on stdout; stdout
carries nothing else, diagnostics go to stderr):

    >II  header length, payload length | header: JSON object | payload: raw bytes

The host puts one newline before each frame it sends, which wakes a sleeping guest
(`sleep`) and which the guest skips otherwise.

Requests carry an integer `id` and an `op`: hello (with `"shell": true`, the persistent
shell is started just after the reply), shell, restart, killall, exec, read, write,
untar, keep; the hello's `"sleep_after"` (seconds, or null) lets an idle guest sleep
(`sleep`), and its payload, if any, is the native sleeper to sleep as. Each gets exactly one reply with the same `id`: `{"ok": true, ...}` or
`{"ok": false, "error": "...", "kind": "file" | "bad"}`. Command output, file contents,
stdin and written data travel as the payload, never as JSON text, so binary data and
50 MB files cost no escaping.

The guest sends nothing until the host's `hello`: bytes that arrived while the host's
HTTP client was still reading docker's upgrade response could be lost.

Dead-man's switch: EOF on stdin means the server died or let go of the sandbox; the
guest then ends the container, whose command it is (`Guest.stop`), and `auto_remove`
deletes it.
"""
