"""platoon's ORS path against two real orsbox servers, in CI (docs/train-with-platoon.md).

platoon 0.4.0 needs Python >= 3.12 and its trainer pulls in torch, so CI does not run it
here; test_platoon_source.py runs the real package where it is installed. This file
reproduces, in our own code, what platoon does on the wire, as read in the published
wheel (platoon-0.4.0-py3-none-any.whl on PyPI, sha256 dab1dbe3...c50c5):

* `platoon/envs/ors/service.py` `OrsEnvironmentService.from_uri`: `ors+http://h1,h2/Env
  ?variant=V` is the environment name `Env`, one `http://` URL per host, the variant;
  `check_server_environment` refuses a name a server lists but not first, with no variant;
  `check_served_class` compares `/tools` (tools and `terminal_tool`) with `env_class`;
* `platoon/envs/ors/pool.py` `select_session_url`: a rollout's server is the SHA-1 of
  its rollout id, modulo the number of servers;
* `platoon/envs/ors/session.py` `RemoteBackend`: the session through the openreward
  client's `AsyncEnvironmentsAPI(base_url=server)`, `api.get(Env, variant=V)`,
  `session(split=, index=)`, `list_tools()` and `terminal_tool()`, `call_tool`; and
  `OrsSession.grade`: the first finished result's reward; a terminal tool that raised is
  an infrastructure error (untrainable); no finished result is 0.0 (`no_submit`).

Two servers serve the bundled math and coding (coding's rollouts run in containers), the
first also an openreward environment with a `@terminal` tool; a group of rollouts spreads
over both, the right answers get 1.0, the wrong ones 0.0 and the grading error `None`,
and nothing is left running.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import docker
import httpx
import pytest
from openreward.api.environments.client import AsyncEnvironmentsAPI

from orsbox.bundle import environments_dir
from tests.integrations.trainers.platoon_envs import Sums
from tests.integrations.trainers.platoon_support import SUMS, assert_nothing_left, servers_of
from tests.servers import LiveServer

pytestmark = pytest.mark.docker

EXAMPLES = environments_dir() / "coding" / "examples"


@dataclass(frozen=True)
class OrsUri:
    env_name: str
    urls: list[str]
    variant: str | None


def parse_uri(uri: str) -> OrsUri:
    """platoon's `ors+http(s)://h1,h2/Env?variant=`."""
    parts = urlsplit(uri)
    assert parts.scheme in ("ors+http", "ors+https"), uri
    scheme = parts.scheme.removeprefix("ors+")
    hosts = [f"{scheme}://{h.strip()}" for h in parts.netloc.split(",") if h.strip()]
    return OrsUri(
        unquote(parts.path.strip("/")), hosts, dict(parse_qsl(parts.query)).get("variant")
    )


def server_for(urls: list[str], rollout_id: str) -> str:
    """platoon's per-rollout server: SHA-1 of the rollout id modulo the pool's size."""
    return urls[int(hashlib.sha1(rollout_id.encode()).hexdigest(), 16) % len(urls)]


def environment_refused(listed: list[str], uri: OrsUri) -> bool:
    """platoon's check: a name the server lists, but not first, needs `?variant=`."""
    names = [n.lower() for n in listed]
    name = uri.env_name.lower()
    return uri.variant is None and len(names) > 1 and name in names and names[0] != name


def _untitled(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _untitled(v) for k, v in schema.items() if k != "title"}
    return schema


def listing_differences(cls: type, answer: dict[str, Any]) -> list[str]:
    """platoon's comparison of a server's `/tools` answer with `env_class.list_tools()`:
    the same names, the terminal tool's included, and the same description and
    parameters (titles aside) for every tool both list as ordinary ones."""

    def entries(tools: list[Any], terminal: Any) -> dict[str, Any]:
        found = {
            t["name"]: (t["description"].strip(), _untitled(t["input_schema"] or {})) for t in tools
        }
        if terminal:
            found.setdefault(terminal["name"], None)
        return found

    listing = cls.list_tools()
    here = entries(
        [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in listing.tools
        ],
        {"name": listing.terminal_tool.name} if listing.terminal_tool else None,
    )
    there = entries(answer["tools"], answer.get("terminal_tool"))
    differences = [f"the server lists no {n}" for n in sorted(set(here) - set(there))]
    differences += [f"the class has no {n}" for n in sorted(set(there) - set(here))]
    for name in sorted(set(here) & set(there)):
        if here[name] is not None and there[name] is not None and here[name] != there[name]:
            differences.append(f"{name} differs")
    return differences


async def rollout(uri: OrsUri, rollout_id: str, task: str, calls: list[tuple[str, dict]]) -> dict:
    """One rollout as platoon's `RemoteBackend` and `OrsSession.grade` make it."""
    url = server_for(uri.urls, rollout_id)
    split, index = task.split(":")
    api = AsyncEnvironmentsAPI(base_url=url, api_key="local", api_base_url=url)
    outcome: dict[str, Any] = {"url": url}
    try:
        environment = api.get(uri.env_name, variant=uri.variant)
        async with environment.session(split=split, index=int(index)) as session:
            listed = await session.list_tools()
            terminal = await session.terminal_tool()
            outcome["tools"] = [t.name for t in listed] + ([terminal.name] if terminal else [])
            for name, arguments in calls:
                try:
                    output = await session.call_tool(name, arguments)
                except Exception as exc:  # platoon records every failure
                    is_terminal = terminal is not None and name == terminal.name
                    outcome.update(error=str(exc), infra=is_terminal)
                    break
                if output.finished:
                    outcome["reward"] = output.reward
                    break
            else:
                outcome["reward"] = 0.0  # no_submit
    finally:
        await api.aclose()
    if outcome.get("infra"):
        outcome["reward"] = None  # platoon's untrainable `error` outcome
    elif "error" in outcome:
        outcome["reward"] = 0.0  # the session is over, nothing was submitted: no_submit
    return outcome


def _example(name: str) -> list[tuple[str, dict]]:
    lines = (EXAMPLES / name).read_text().splitlines()
    return [(c["name"], c["input"]) for c in map(json.loads, lines)]


@pytest.fixture(scope="module")
def servers(
    tmp_path_factory: pytest.TempPathFactory, base_image: str
) -> Iterator[list[LiveServer]]:
    """Two servers of math and coding; the first also serves Sums (an openreward class:
    importing openreward costs a server 2-3 s of CPU)."""
    with servers_of([["math", "coding", SUMS], ["math", "coding"]], tmp_path_factory) as both:
        yield both


def _hosts(servers: list[LiveServer]) -> str:
    return ",".join(s.url.removeprefix("http://") for s in servers)


def test_the_uri_and_the_server_each_rollout_takes(servers: list[LiveServer]) -> None:
    uri = parse_uri(f"ors+http://{_hosts(servers)}/coding?variant=coding")
    assert uri == OrsUri("coding", [s.url for s in servers], "coding")
    chosen = {server_for(uri.urls, f"step0-g{i}") for i in range(8)}
    assert chosen == set(uri.urls)  # eight rollout ids reach both servers
    assert server_for(uri.urls, "step0-g0") == server_for(uri.urls, "step0-g0")  # stable per id
    listed = httpx.get(f"{servers[1].url}/list_environments").json()
    assert listed == ["math", "coding"]
    # platoon refuses `/coding` on a server whose default is math (it would run math on
    # the reference server, which reads no deployment header); orsbox routes by name,
    # but platoon asks first, so the URI names the variant.
    assert environment_refused(listed, parse_uri(f"ors+http://{_hosts(servers)}/coding"))
    assert not environment_refused(listed, uri)
    assert not environment_refused(listed, parse_uri(f"ors+http://{_hosts(servers)}/math"))


def test_tools_match_the_class_with_its_terminal_tool(servers: list[LiveServer]) -> None:
    answer = httpx.get(f"{servers[0].url}/sums/tools").json()
    assert answer["terminal_tool"] == {
        "name": "answer",
        "arg": "answer",
        "description": "Give the final answer.",
    }
    assert [t["name"] for t in answer["tools"]] == ["scratch"]
    assert listing_differences(Sums, answer) == []
    # Before orsbox advertised it, platoon refused every session of such a class:
    hidden = {"tools": answer["tools"]}
    assert listing_differences(Sums, hidden) == ["the server lists no answer"]
    # an environment with no @terminal tool sends no such key, as the reference does
    assert "terminal_tool" not in httpx.get(f"{servers[0].url}/math/tools").json()


def test_the_openreward_client_ends_an_episode_with_the_final_message(
    servers: list[LiveServer],
) -> None:
    """What a harness does with an environment whose plain assistant message is final:
    the openreward client passes the message to the advertised `@terminal` tool."""

    async def play(message: str) -> float | None:
        url = servers[0].url
        api = AsyncEnvironmentsAPI(base_url=url, api_key="local", api_base_url=url)
        try:
            async with api.get("sums").session(split="train", index=1) as session:
                assert await session.is_assistant_message_final()
                return (await session.call_terminal_tool(message)).reward
        finally:
            await api.aclose()

    assert asyncio.run(play("42")) == 1.0
    assert asyncio.run(play("41")) == 0.0


def test_a_group_spreads_over_both_servers_with_the_right_rewards(
    servers: list[LiveServer], docker_client: docker.DockerClient
) -> None:
    hosts = _hosts(servers)
    sums = parse_uri(f"ors+http://{_hosts(servers[:1])}/sums?variant=sums")  # the first only
    math = parse_uri(f"ors+http://{hosts}/math?variant=math")
    coding = parse_uri(f"ors+http://{hosts}/coding?variant=coding")
    plan = [
        (
            sums,
            "step0-g0",
            "train:0",
            [("scratch", {"text": "2+3"}), ("answer", {"answer": "5"})],
            1.0,
        ),
        (sums, "step0-g1", "train:0", [("answer", {"answer": "6"})], 0.0),
        (sums, "step0-g2", "train:1", [("answer", {"answer": "42"})], 1.0),
        (sums, "step0-g3", "train:2", [("answer", {"answer": "2"})], None),  # grading error
        (math, "step0-g4", "train:0", [("submit", {"answer": "7"})], 1.0),
        (math, "step0-g5", "train:0", [("submit", {"answer": "8"})], 0.0),
        (coding, "step0-g6", "train:0", _example("train-0-correct.jsonl"), 1.0),
        (coding, "step0-g7", "train:0", _example("train-0-wrong.jsonl"), 0.0),
    ]

    async def group() -> list[dict]:
        return await asyncio.gather(
            *(rollout(u, rid, task, calls) for u, rid, task, calls, _ in plan)
        )

    outcomes = asyncio.run(group())
    assert [o["reward"] for o in outcomes] == [want for *_, want in plan]
    assert {o["url"] for o in outcomes} == {s.url for s in servers}
    assert outcomes[0]["tools"] == ["scratch", "answer"]
    assert outcomes[3]["infra"] and "[infra] grading_error: " in outcomes[3]["error"]
    assert_nothing_left(servers, docker_client)
