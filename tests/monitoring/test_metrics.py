"""`GET /metrics` after real episodes, read with Prometheus's own text parser: every
count and histogram matches what the test did."""

from __future__ import annotations

from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.monitoring.conftest import (
    CODING,
    PROTOCOL,
    Episode,
    recording_server,
    wait_for_episode,
)
from tests.servers import LiveServer
from tests.waiting import wait_until

BIG = 200_000  # bytes printed past the 64 KiB output cap


def scrape(server: LiveServer, **headers: str) -> dict[tuple[str, frozenset], float]:
    answer = httpx.get(f"{server.url}/metrics", headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def test_metrics_count_what_the_episodes_did(coding_server: tuple[LiveServer, Path]) -> None:
    server, db = coding_server
    before = scrape(server)

    protocol = Episode(server, "protocol")
    protocol.create()
    for word in ("a", "b", "c"):
        assert protocol.call("echo", text=word).result()["ok"]
    assert protocol.call("no_such_tool").result()["ok"] is False
    assert protocol.call("explode").names() == ["task_id", "error"]
    assert protocol.call("submit", answer="0").result()["output"]["reward"] == 1.0
    failed = Episode(server, "protocol")
    failed.create(task_spec={"fail_setup": True}, prompt=False)

    coding = Episode(server, "coding")
    coding.create()
    assert coding.call("bash", command="echo hi").result()["output"]["metadata"]["exit_code"] == 0
    slow = coding.call("bash", command="sleep 30", timeout=1).result()["output"]["metadata"]
    assert slow["timed_out"]
    big = coding.call("bash", command=f"head -c {BIG} /dev/zero | tr '\\0' a").result()
    assert big["output"]["metadata"]["truncated"]

    during = wait_until(
        lambda: (
            (s := scrape(server))
            and value(s, "orsbox_sessions", environment="protocol", state="failed") == 1
            and s
        ),
        10,
        message="the failed setup shows",
    )
    assert value(during, "orsbox_sessions", environment="coding", state="ready") == 1
    for episode in (protocol, failed, coding):
        episode.delete()
    wait_for_episode(db, coding.sid, calls=3)
    after = scrape(server)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    calls = "orsbox_tool_calls_total"
    assert grew(calls, environment="protocol", tool="echo", outcome="ok") == 3
    assert grew(calls, environment="protocol", tool="unknown", outcome="tool_error") == 1
    assert grew(calls, environment="protocol", tool="explode", outcome="raised") == 1
    assert grew(calls, environment="protocol", tool="submit", outcome="ok") == 1
    assert grew(calls, environment="coding", tool="bash", outcome="ok") == 1
    assert grew(calls, environment="coding", tool="bash", outcome="timed_out") == 1
    assert grew(calls, environment="coding", tool="bash", outcome="truncated") == 1

    latency = "orsbox_tool_call_duration_seconds"
    assert grew(f"{latency}_count", environment="protocol") == 6
    assert grew(f"{latency}_count", environment="coding") == 3
    assert grew(f"{latency}_bucket", environment="coding", le="+Inf") == 3
    assert grew(f"{latency}_sum", environment="coding") >= 1.0  # the timed-out call's second
    assert grew(f"{latency}_bucket", environment="coding", le="0.5") == 2  # the other two
    in_sandbox = "orsbox_sandbox_exec_duration_seconds"
    assert grew(f"{in_sandbox}_count", environment="coding") == 3
    assert grew(f"{in_sandbox}_bucket", environment="coding", le="0.5") == 2

    assert grew("orsbox_session_starts_total", environment="protocol") == 2
    assert grew("orsbox_session_starts_total", environment="coding") == 1
    assert grew("orsbox_session_failures_total", environment="protocol", cause="setup_error") == 1
    assert grew("orsbox_sandbox_starts_total", outcome="ok") == 1
    assert grew("orsbox_sandbox_start_duration_seconds_count") == 1
    capped = grew("orsbox_output_capped_bytes_total", environment="coding")
    assert BIG - 65 * 1024 <= capped < BIG - 63 * 1024  # all but the kept 64 KiB (and marker)
    assert value(after, "orsbox_engine_up") == 1
    assert value(after, "orsbox_sessions", environment="coding", state="ready") == 0


def test_metrics_need_the_token_unless_public(tmp_path: Path) -> None:
    server, _ = recording_server([PROTOCOL], tmp_path, token="metrics-test-token")
    try:
        assert httpx.get(f"{server.url}/metrics").status_code == 401
        assert (
            "orsbox_session_starts"
            in httpx.get(
                f"{server.url}/metrics", headers={"Authorization": "Bearer metrics-test-token"}
            ).text
        )
    finally:
        server.stop()
    public, _ = recording_server([PROTOCOL], tmp_path, token="metrics-test-token", metrics_public=1)
    try:
        assert httpx.get(f"{public.url}/metrics").status_code == 200
        assert httpx.get(f"{public.url}/list_environments").status_code == 401
    finally:
        public.stop()


def test_warm_pool_metrics(tmp_path: Path, bundled_images: None) -> None:
    """(A reaped session's metric and record: tests/test_server_timeouts.py, on a manual
    clock.)"""
    server, _ = recording_server([CODING, PROTOCOL], tmp_path, warm_pool=1)
    try:
        wait_until(
            lambda: value(scrape(server), "orsbox_warm_pool_idle") == 1, 60, message="pool filled"
        )
        warm = Episode(server, "coding")
        warm.create()
        assert warm.call("bash", command="echo warm").result()["ok"]
        after = scrape(server)
        assert value(after, "orsbox_warm_pool_hits_total") == 1
        assert value(after, "orsbox_sandbox_starts_total", outcome="ok") == 1  # the hit
        warm.delete()
    finally:
        server.stop()
