"""Docker's stream multiplexing: an attach or exec socket without a tty carries stdout
and stderr in frames with an 8-byte header (stream type, 3 zero bytes, big-endian
length). `DockerDemux` splits them for the guest channel (`orsbox.sandbox.guest.channel`),
which itself only knows a byte stream."""

from __future__ import annotations

import struct

DOCKER_HEAD = struct.Struct(">BxxxL")
STDOUT, STDERR = 1, 2


class DockerDemux:
    """Buffers at most one incomplete docker frame."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> tuple[list[bytes], list[bytes]]:
        """(stdout chunks, stderr chunks) complete so far."""
        self._buffer += data
        out: list[bytes] = []
        errors: list[bytes] = []
        while len(self._buffer) >= DOCKER_HEAD.size:
            stream, size = DOCKER_HEAD.unpack_from(self._buffer)
            end = DOCKER_HEAD.size + size
            if len(self._buffer) < end:
                break
            chunk = bytes(self._buffer[DOCKER_HEAD.size : end])
            del self._buffer[:end]
            (errors if stream == STDERR else out).append(chunk)
        return out, errors
