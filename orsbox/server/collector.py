"""The cyclic garbage collector, set for a server that runs for days.

A full collection walks every object the collector tracks and holds the event loop
while it does: every call in flight waits it out. Most of what a started server holds
never becomes garbage (its modules, classes, routes and clients: about 100,000 tracked
objects), so it is moved out of the collector's reach once, when the server has
started (`gc.freeze`). A full pass then walks only what the server made since, which
is what the live sessions hold (docs/operating/sizing.md has the pauses before and
after).
"""

from __future__ import annotations

import gc


def settle_collector() -> None:
    """Collect what startup left, then exempt what remains from later passes."""
    gc.collect()
    gc.freeze()
