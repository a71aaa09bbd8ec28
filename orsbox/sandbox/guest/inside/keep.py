"""The payload's copy for sub-guests: written once per sandbox, on the host's first
`keep` (its first `exec(user=...)`), so a sub-guest's loader reads it instead of
receiving the payload again.

Where the main guest can write, which a command of the same user can too: the loader
of a sub-guest runs the copy only if its SHA-256 is the one on its command line (the
host's), so a changed copy is refused, never run, possibly as root. The file is
readable by every user (a sub-guest may run as any) and its name is random and made
with O_EXCL, so nothing put there first is mistaken for it."""

import os

from .quiet import suppress
from .wire import write_all

KEEP_FOLDERS = ("/dev/shm", "/tmp", "/run", "/var/tmp")  # tmpfs first: not in a snapshot


def keep(payload, previous=None):
    """Write `payload` to a new file readable by all, in the first folder that takes
    it; return its path, or None if none did (sub-guests then get the payload sent).
    `previous`, an earlier copy, is removed."""
    if previous is not None:
        with suppress(OSError):
            os.unlink(previous)
    for folder in KEEP_FOLDERS:
        path = os.path.join(folder, "orsbox-guest-" + os.urandom(8).hex())
        if write_new(path, payload):
            return path
    return None


def write_new(path, data):
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o444)
    except OSError:
        return False
    try:
        os.fchmod(fd, 0o444)  # whatever the umask
        write_all(fd, data)
        return True
    except OSError:
        with suppress(OSError):
            os.unlink(path)
        return False
    finally:
        os.close(fd)
