"""Harbor and Terminal-Bench 1 tasks played end to end through the ors-sdk client
against `orsbox serve`: each honoured field seen from inside the sandbox, and grading
exactly as Harbor's verifier grades, including an agent that tries to cheat it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from ors.client import ORS

from tests.servers import LiveServer

SOLVE = 'echo "$GREETING" > /app/out.txt'


@pytest.fixture
def client(episodes_server: LiveServer) -> Iterator[ORS]:
    with ORS(base_url=episodes_server.url) as ors:
        yield ors


def play(
    client: ORS, task: str, commands: list[str], then: str = "submit"
) -> tuple[list[str], Any]:
    """Run `commands` with bash in task `task`, then call `then`: (outputs, last result)."""
    env = client.environment("tb")
    (spec,) = [t for t in env.list_tasks(split="test") if t.task_spec["name"] == task]
    outputs = []
    with env.session(task=spec) as session:
        assert session.get_prompt()[0].text
        for command in commands:
            result = session.call_tool("bash", {"command": command})
            outputs.append(result.blocks[0].text)
        last = session.call_tool(then, {} if then == "submit" else {"command": "true"})
    return outputs, last


def test_tasks_are_listed_by_name_with_the_standard_tools(client: ORS) -> None:
    env = client.environment("tb")
    names = [t.task_spec["name"] for t in env.list_tasks(split="test")]
    assert names == [
        "crash", "given", "hello", "keys", "slow", "storage", "tb1-hello", "users", "word-reward"
    ]  # fmt: skip
    tools = sorted(t.name for t in env.list_tools())
    assert tools == ["bash", "edit_file", "list_dir", "read_file", "submit", "write_file"]


@pytest.mark.parametrize("task", ["hello", "keys", "storage", "given", "tb1-hello"])
def test_solution_scores_one_and_no_change_zero(client: ORS, task: str) -> None:
    _, solved = play(client, task, ["echo hello > /app/out.txt"])
    _, untouched = play(client, task, [])
    assert (solved.reward, solved.finished) == (1.0, True)
    assert (untouched.reward, untouched.finished) == (0.0, True)


def test_honoured_fields_seen_from_inside(client: ORS) -> None:
    cgroup = (
        "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max;"
        "cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null || cat /sys/fs/cgroup/cpu.max"
    )
    outputs, _ = play(
        client, "hello", ["pwd; echo $GREETING; id -un", cgroup, "ls /sys/class/net", "ls /tests",
                          "stat -c %F /logs/agent /logs/verifier"]
    )  # fmt: skip
    assert outputs[0].split() == ["/app", "hello", "root"]  # workdir, env, user
    assert outputs[1].split()[0] == str(512 * 1024**2) and "100000" in outputs[1]  # memory, cpus
    assert outputs[2].split() == ["lo"]  # network_mode = "no-network": no interface but lo
    assert "No such file" in outputs[3]  # the tests arrive only when grading
    assert outputs[4].split("\n")[:2] == ["directory", "directory"]  # as Harbor makes them


def test_agent_user_and_verifier_user(client: ORS) -> None:
    outputs, solved = play(client, "users", ["id -un", 'echo "$GREETING" > /tmp/out.txt'])
    assert outputs[0].strip() == "nobody"
    assert solved.reward == 1.0  # test.sh ran as root ([verifier].user)


def test_a_task_writing_past_storage_mb_is_ended_naming_the_bound(client: ORS) -> None:
    with pytest.raises(Exception, match="past its storage bound of 64 MiB"):
        play(client, "storage", ["head -c 100M /dev/zero > /var/tmp/big"])


def test_a_task_within_storage_mb_is_not_ended(client: ORS) -> None:
    outputs, solved = play(
        client, "storage", ["head -c 16M /dev/zero > /var/tmp/f && stat -c %s /var/tmp/f", SOLVE]
    )
    assert outputs[0].strip() == str(16 * 1024 * 1024)  # bytes: du may count a block more
    assert (solved.reward, solved.finished) == (1.0, True)


def test_reward_json_with_several_keys(client: ORS) -> None:
    _, solved = play(client, "keys", [SOLVE])
    assert solved.reward == 1.0
    assert solved.metadata["rewards"] == {"reward": 1, "tests_passed": 3, "style": 0.5}


def test_a_crashing_test_sh_is_a_grading_error_with_its_output(client: ORS) -> None:
    with pytest.raises(RuntimeError) as raised:
        play(client, "crash", [SOLVE])
    text = str(raised.value)  # Harbor: RewardFileNotFoundError, no reward
    assert "grading error [no-reward-file]" in text and "the tests crashed: boom" in text


def test_a_reward_file_that_is_not_a_number_is_a_grading_error(client: ORS) -> None:
    with pytest.raises(RuntimeError) as raised:
        play(client, "word-reward", [SOLVE])
    text = str(raised.value)  # Harbor: VerifierOutputParseError, no reward
    assert "grading error [bad-reward-file]: reward.txt is not one number" in text
    assert "the tests wrote a word" in text  # what test.sh said


def test_a_reward_file_the_agent_wrote_is_not_counted(client: ORS) -> None:
    forge = "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt && echo '{\"reward\": 1}' > /logs/verifier/reward.json"
    _, graded = play(client, "hello", [forge])
    assert graded.reward == 0.0 and "reward 0 from reward.txt" in graded.blocks[0].text


def test_a_background_writer_is_killed_before_grading(client: ORS) -> None:
    writer = (
        "nohup bash -c 'while :; do mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt;"
        " sleep 0.01; done' >/dev/null 2>&1 &"
    )
    wait = (
        "until [ -s /logs/verifier/reward.txt ]; do sleep 0.01; done; cat /logs/verifier/reward.txt"
    )
    outputs, graded = play(client, "hello", [writer, wait])
    assert outputs[1].strip() == "1"  # the writer runs
    assert graded.reward == 0.0 and "reward 0 from reward.txt" in graded.blocks[0].text
    assert graded.metadata["processes_killed"] >= 1


def test_the_agent_timeout_grades_the_sandbox_as_it_is(client: ORS) -> None:
    outputs, late = play(client, "slow", [SOLVE, "sleep 30"], then="bash")
    assert "timed out" in outputs[1]  # cut to the time left (4 s), not 30 s
    assert (late.reward, late.finished) == (1.0, True)
    assert "time limit of 4s has passed" in late.blocks[0].text


def test_terminal_bench_1_resolved_only_when_every_test_passes(client: ORS) -> None:
    _, half = play(client, "tb1-hello", ["touch /app/out.txt"])
    assert half.reward == 0.0 and "[unresolved: 1/2 tests passed]" in half.blocks[0].text
    assert half.metadata["parser_results"] == {
        "test_file_exists": "PASSED",
        "test_content": "FAILED",
    }


def test_an_episode_is_graded_once(client: ORS) -> None:
    env = client.environment("tb")
    (spec,) = [t for t in env.list_tasks(split="test") if t.task_spec["name"] == "hello"]
    with env.session(task=spec) as session:
        first = session.call_tool("submit", {})
        session.call_tool("bash", {"command": SOLVE})
        again = session.call_tool("submit", {})
    assert (first.reward, again.reward) == (0.0, 0.0)
    assert again.blocks[0].text == first.blocks[0].text
