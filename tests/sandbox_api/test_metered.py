"""The sandbox API in `/metrics` as sessions are: its sandboxes start through the
server's one metered backend (`orsbox_sandbox_starts_total`, the start histogram) and
each `/run` is a call (`orsbox_tool_calls_total{environment="sandbox-api", tool="run"}`,
its time on the server and in the sandbox). And its one image map, applied once: two
rules that chain take a client's image one step, never two."""

from __future__ import annotations

from collections.abc import Iterator

import docker
import pytest
from openreward import AsyncOpenReward

from tests.monitoring.test_metrics import scrape, value
from tests.sandbox_api.conftest import TOKEN_A, api_server_settings, sandbox_settings
from tests.servers import LiveServer, start_server

pytestmark = pytest.mark.anyio
CHAINED = "orsbox/chained:1"
MISSING = "orsbox/no-such-image:never"
RUN = {"environment": "sandbox-api", "tool": "run"}
AUTHORIZED = {"Authorization": f"Bearer {TOKEN_A}"}
Samples = dict[tuple[str, frozenset], float]


@pytest.fixture(scope="module")
def metered_server(
    tmp_path_factory: pytest.TempPathFactory, base_image: str
) -> Iterator[LiveServer]:
    # Mapped once, CHAINED runs the base image; mapped twice, it would be a missing one.
    rules = f"{CHAINED}={base_image} {base_image}={MISSING}"
    server = start_server(
        ["tests/fixture_envs/protocol_envs.py:Protocol"],
        tmp_path_factory.mktemp("sandbox-api-metered"),
        **api_server_settings(image_map=rules),
    )
    yield server
    server.stop()


def grown(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


async def test_sandbox_api_starts_and_runs_are_metered_and_mapped_once(
    metered_server: LiveServer, base_image: str, docker_client: docker.DockerClient
) -> None:
    client = AsyncOpenReward(api_key=TOKEN_A, base_url="http://unused.invalid")
    client.session_base_url = metered_server.url
    before = scrape(metered_server, **AUTHORIZED)
    async with client.sandbox(sandbox_settings(CHAINED)) as box:
        [container] = docker_client.api.containers(filters={"label": f"orsbox.session={box.sid}"})
        assert container["Image"] == base_image  # one step of the map, not two
        assert await box.check_run("echo ok") == "ok"
        late = await box.run("sleep 30", timeout=1)
        assert late.timed_out
    after = scrape(metered_server, **AUTHORIZED)
    assert grown(before, after, "orsbox_sandbox_starts_total", outcome="ok") == 1
    assert grown(before, after, "orsbox_sandbox_start_duration_seconds_count") == 1
    assert grown(before, after, "orsbox_tool_calls_total", **RUN, outcome="ok") == 1
    assert grown(before, after, "orsbox_tool_calls_total", **RUN, outcome="timed_out") == 1
    where = {"environment": "sandbox-api"}
    assert grown(before, after, "orsbox_tool_call_duration_seconds_count", **where) == 2
    assert grown(before, after, "orsbox_sandbox_exec_duration_seconds_count", **where) == 2
