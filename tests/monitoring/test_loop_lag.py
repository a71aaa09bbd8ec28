"""`orsbox_event_loop_lag_seconds` on a real server: small while it idles, and a
coroutine that blocks the loop shows up as a lag as long as the block."""

from __future__ import annotations

from pathlib import Path

from tests.monitoring.conftest import Episode
from tests.monitoring.test_metrics import scrape, value
from tests.servers import start_server
from tests.waiting import wait_until

LAG = "orsbox_event_loop_lag_seconds"
HOG = "tests/fixture_envs/loop_envs.py:LoopHog"
HOLD_S = 1.0


def lag_count(samples: dict, le: str = "+Inf") -> float:
    return value(samples, f"{LAG}_bucket", le=le)


def test_loop_lag_is_small_at_idle_and_shows_a_blocked_loop(tmp_path: Path) -> None:
    server = start_server([HOG], tmp_path, record_episodes=False)
    try:
        start = scrape(server)
        idle = wait_until(
            lambda: (s := scrape(server)) and lag_count(s) - lag_count(start) >= 100 and s,
            30,
            message="the monitor has sampled an idle second",
        )
        samples = lag_count(idle) - lag_count(start)
        quick = lag_count(idle, "0.025") - lag_count(start, "0.025")
        assert quick >= samples / 2, f"idle median lag over 25 ms: {quick} of {samples}"

        episode = Episode(server, "LoopHog")
        episode.create(task_spec={})
        assert episode.call("hold_loop", seconds=HOLD_S).result()["ok"]
        held = wait_until(
            lambda: (s := scrape(server)) and lag_count(s) > lag_count(idle) and s,
            10,
            message="a sample after the block",
        )
        long = lag_count(held) - lag_count(held, "0.5")
        long_before = lag_count(idle) - lag_count(idle, "0.5")
        assert long - long_before >= 1, "the 1 s block left no lag sample over 0.5 s"
        assert value(held, f"{LAG}_sum") - value(idle, f"{LAG}_sum") >= HOLD_S * 0.9
        episode.delete()
    finally:
        server.stop()
