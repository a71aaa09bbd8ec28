"""The descriptors the guest's loop waits on, and what it calls when one is ready: an
epoll with a callback per descriptor, what `selectors.DefaultSelector` is on Linux.
Why not `selectors`: importing it costs the guest 0.6 MiB of memory (it brings
`collections`), measured in python 3.11, for the sandbox's whole life
(docs/operating/sizing.md).

As with the selector, a ready descriptor (readable, writable, or hung up: the callback's
read or write then finds EOF or an error) is reported once per wait, and a descriptor
closed while registered leaves the epoll by itself."""

import math
import select

READ = select.EPOLLIN
WRITE = select.EPOLLOUT


class Watch:
    def __init__(self):
        self.epoll = select.epoll()
        self.callbacks = {}  # descriptor -> what to call with it when it is ready

    def register(self, fd, events, callback):
        self.epoll.register(fd, events)
        self.callbacks[fd] = callback

    def unregister(self, fd):
        del self.callbacks[fd]
        self.epoll.unregister(fd)

    def ready(self, timeout):
        """(descriptor, callback) of each ready descriptor, waiting at most `timeout`
        seconds (None: until one is), rounded up to the millisecond as the selector
        does (epoll counts in milliseconds: a shorter wait would return early)."""
        if timeout is None:
            timeout = -1
        elif timeout > 0:
            timeout = math.ceil(timeout * 1e3) * 1e-3
        events = self.epoll.poll(timeout, max(len(self.callbacks), 1))
        return [(fd, self.callbacks[fd]) for fd, _ in events if fd in self.callbacks]
