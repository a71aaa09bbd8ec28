"""How late the server's event loop wakes: the lag every request waits on.

One task sleeps `INTERVAL_S` over and over and records how much later than asked it
woke. Anything that holds the loop (synchronous work in a coroutine, a long callback,
the GIL taken by other threads, the process starved of CPU) shows up as lag, whatever
caused it, so the figure tells an operator whether a slow `/health` is the server
blocking or the machine starving it (issue 23). It costs one timer wake-up and one
histogram update per interval: about 100 a second, a few microseconds each.
"""

from __future__ import annotations

import asyncio

from prometheus_client import Histogram

INTERVAL_S = 0.01


async def watch_loop_lag(histogram: Histogram, interval_s: float = INTERVAL_S) -> None:
    """Record the loop's lag into `histogram` until cancelled."""
    loop = asyncio.get_running_loop()
    while True:
        asked = loop.time() + interval_s
        await asyncio.sleep(interval_s)
        histogram.observe(max(loop.time() - asked, 0.0))
