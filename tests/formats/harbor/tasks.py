"""Task folders written for the tests, in both formats, covering each honoured field.

Every image starts `FROM ubuntu:24.04`, which the tests map onto the local Debian base
(`IMAGE_MAP`): the offline path a user without a registry takes. Every Dockerfile ends
with a label naming this test run, so its image's tag (a hash of the content) is this
run's own: a run elsewhere on the same engine, whose fixtures remove their images when
done, cannot remove an image this one is using.
"""

from __future__ import annotations

import textwrap
import uuid
from pathlib import Path

IMAGE_MAP = "ubuntu:24.04=orsbox/debian:bookworm"
DOCKERFILE = "FROM ubuntu:24.04\nWORKDIR /app\n"
RUN_ID = uuid.uuid4().hex[:12]
RUN_LABEL = f"LABEL orsbox.test-run={RUN_ID}\n"  # last: the steps before it stay cached


def write(folder: Path, files: dict[str, str], executable: tuple[str, ...] = ()) -> Path:
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        text = textwrap.dedent(text).lstrip("\n")
        path.write_text(text + RUN_LABEL if path.name == "Dockerfile" else text)
        if name in executable or name.endswith(".sh"):
            path.chmod(0o755)
    return folder


TASK_TOML = """
schema_version = "1.4"

[task]
name = "orsbox-tests/{name}"
description = "a test task"
authors = [{{ name = "orsbox tests" }}]
keywords = ["test"]

[metadata]
difficulty = "easy"

[verifier]
timeout_sec = {verifier_timeout}
user = "root"
env = {{ EXPECTED = "hello" }}

[agent]
timeout_sec = {agent_timeout}

[environment]
build_timeout_sec = 300.0
cpus = 1
memory_mb = 512
workdir = "/app"
network_mode = "no-network"
env = {{ GREETING = "hello" }}
{extra}
[solution]
env = {{ ANSWER = "hello" }}
"""


def harbor_task(
    folder: Path,
    test_sh: str,
    *,
    agent_timeout: float = 300,
    verifier_timeout: float = 60,
    extra: str = "",
    solve_sh: str = 'echo "$ANSWER" > /app/out.txt\n',
    instruction: str = "Write the value of $GREETING into /app/out.txt.\n",
) -> Path:
    toml = TASK_TOML.format(
        name=folder.name, agent_timeout=agent_timeout, verifier_timeout=verifier_timeout,
        extra=extra,
    )  # fmt: skip
    return write(
        folder,
        {
            "task.toml": toml,
            "instruction.md": instruction,
            "environment/Dockerfile": DOCKERFILE,
            "tests/test.sh": test_sh,
            "solution/solve.sh": "#!/bin/bash\n" + solve_sh,
        },
    )


CHECK_OUT = """
#!/bin/bash
if [ "$(cat /app/out.txt 2>/dev/null)" = "$EXPECTED" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo "out.txt does not say $EXPECTED"
  echo 0 > /logs/verifier/reward.txt
fi
"""

SEVERAL_KEYS = """
#!/bin/bash
if [ "$(cat /app/out.txt 2>/dev/null)" = "$EXPECTED" ]; then c=1; else c=0; fi
printf '{"reward": %s, "tests_passed": %s, "style": 0.5}' "$c" "$((c * 3))" \
  > /logs/verifier/reward.json
"""

CRASHES = """
#!/bin/bash
echo "the tests crashed: boom"
exit 3
"""

WORD_REWARD = """
#!/bin/bash
echo "the tests wrote a word"
echo yes > /logs/verifier/reward.txt
"""


def harbor_dataset(root: Path) -> Path:
    """Five Harbor tasks, each passing with its solution and failing untouched."""
    harbor_task(root / "hello", CHECK_OUT)
    harbor_task(root / "keys", SEVERAL_KEYS)
    harbor_task(root / "storage", CHECK_OUT, extra="storage_mb = 64\n")
    harbor_task(
        root / "users",
        CHECK_OUT.replace("/app/out.txt", "/tmp/out.txt"),
        extra="",
        solve_sh='[ "$(id -un)" = nobody ] && echo "$ANSWER" > /tmp/out.txt\n',
        instruction="Write hello into /tmp/out.txt.\n",
    )
    users = root / "users" / "task.toml"
    users.write_text(users.read_text().replace("[agent]\n", '[agent]\nuser = "nobody"\n'))
    write_tb1_task(root / "tb1-hello")
    return root


def write_tb1_task(folder: Path) -> Path:
    """A Terminal-Bench 1 task: task.yaml, Dockerfile, run-tests.sh, pytest tests."""
    return write(
        folder,
        {
            "task.yaml": """
                instruction: |
                  Write hello into /app/out.txt.
                author_name: orsbox tests
                difficulty: easy
                category: testing
                tags: [test]
                parser_name: pytest
                max_agent_timeout_sec: 300
                max_test_timeout_sec: 120
            """,
            "Dockerfile": "FROM ubuntu:24.04\n"
            "RUN apt-get update && apt-get install -y --no-install-recommends python3-pytest"
            " && rm -rf /var/lib/apt/lists/*\nWORKDIR /app\n",
            "docker-compose.yaml": """
                services:
                  client:
                    build:
                      dockerfile: Dockerfile
                    image: ${T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME}
                    command: [ "sh", "-c", "sleep infinity" ]
                    environment:
                      - TEST_DIR=${T_BENCH_TEST_DIR}
            """,
            "run-tests.sh": """
                #!/bin/bash
                cd /app
                python3 -m pytest "$TEST_DIR/test_outputs.py" -rA -p no:cacheprovider
            """,
            "tests/test_outputs.py": """
                from pathlib import Path


                def test_file_exists():
                    assert Path("/app/out.txt").exists()


                def test_content():
                    assert Path("/app/out.txt").read_text().strip() == "hello"
            """,
            "solution.sh": "#!/bin/bash\necho hello > /app/out.txt\n",
        },
    )


def episodes_dataset(root: Path) -> Path:
    """The five checked tasks plus the ones that misbehave on purpose."""
    harbor_dataset(root)
    harbor_task(root / "crash", CRASHES)
    harbor_task(root / "word-reward", WORD_REWARD)
    harbor_task(root / "slow", CHECK_OUT, agent_timeout=4)
    # a published image named in task.toml (mapped), used as it is, storage_mb a bound
    harbor_task(root / "given", CHECK_OUT, extra='docker_image = "ubuntu:24.04"\nstorage_mb = 32\n')
    return root


def broken_dataset(root: Path) -> Path:
    """A task whose Dockerfile fails to build beside one that builds."""
    harbor_task(root / "good", CHECK_OUT)
    broken = harbor_task(root / "broken", CHECK_OUT)
    write(
        broken, {"environment/Dockerfile": DOCKERFILE + "RUN echo the-last-build-line && false\n"}
    )
    return root
