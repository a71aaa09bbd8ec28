"""Bounded output: what a command prints, kept within its cap."""


class Capture:
    """Bounded output: the first half of the cap, the last half, and a byte count.

    Memory never exceeds the cap, however much a command prints."""

    def __init__(self, cap):
        self.cap = max(int(cap), 2)
        self.head_cap = self.cap // 2
        self.tail_cap = self.cap - self.head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data):
        self.total += len(data)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if not data:
            return
        if len(data) >= self.tail_cap:
            self.tail = bytearray(data[len(data) - self.tail_cap :])
            return
        self.tail += data
        excess = len(self.tail) - self.tail_cap
        if excess > 0:
            del self.tail[:excess]

    def result(self):
        """(bytes, truncated)"""
        cut = self.total - len(self.head) - len(self.tail)
        if cut <= 0:
            return bytes(self.head + self.tail), False
        marker = (
            f"\n[... {cut} bytes cut: the output was {self.total} bytes,"
            f" over the {self.cap}-byte cap ...]\n"
        )
        return bytes(self.head) + marker.encode() + bytes(self.tail), True
