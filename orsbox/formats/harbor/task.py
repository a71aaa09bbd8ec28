"""One task folder read into what an episode needs, the same shape for both formats.

    Harbor                          Terminal-Bench 1
    task.toml                       task.yaml
    instruction.md                  task.yaml's instruction
    environment/Dockerfile          Dockerfile (or docker-compose.yaml's one service)
    tests/test.sh -> reward file    run-tests.sh + tests/ -> pytest summary
    solution/solve.sh               solution.sh

Everything that can be checked without a container is checked here, at load, and a
problem is a `ManifestError` naming the task, the file or field, and what is wrong.
Each format's verifier is chosen here, once: `HarborVerifier` (reward files) or
`PytestVerifier` (Terminal-Bench 1's pytest summary).
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from orsbox.errors import ManifestError
from orsbox.formats.harbor import HarborOptions
from orsbox.formats.harbor.images import TaskImage, task_image
from orsbox.formats.harbor.phases import NetworkAllowed, PhaseNetwork, phase_networks, refusals
from orsbox.formats.harbor.pytest_summary import PytestVerifier
from orsbox.formats.harbor.refusals import task_toml_refusals, tb1_refusals
from orsbox.formats.harbor.reward_files import HarborVerifier
from orsbox.formats.harbor.task_config import read_task_toml, read_task_yaml
from orsbox.formats.harbor.verifier import Verifier
from orsbox.sandbox.base import SandboxLimits

log = logging.getLogger("orsbox.formats.harbor")

MiB = 1024 * 1024
DEFAULT_MEMORY_MB = 2048  # Harbor's docker environment leaves memory unset; a bound is kept
NETWORK_SETTING = "ORSBOX_ALLOW_NETWORK=1"
_TEMPLATE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")

Format = Literal["harbor", "terminal-bench-1"]


@dataclass(frozen=True)
class HarborTask:
    name: str
    folder: Path
    kind: Format
    instruction: str
    image: TaskImage
    limits: SandboxLimits
    agent_user: str | None
    workdir: str | None
    env: dict[str, str]
    agent_timeout_s: float | None
    verifier: Verifier
    solution: Path | None
    solution_env: dict[str, str] = field(default_factory=dict)
    verifier_network: PhaseNetwork | None = None  # None: the agent phase's (`phases.py`)

    def spec(self) -> dict[str, str]:
        """The task spec a client sees: enough to find the task by name."""
        return {"name": self.name, "format": self.kind}


def phase_set(task: HarborTask) -> list[PhaseNetwork]:
    """The networks `task`'s sandbox has over its episode."""
    agent = PhaseNetwork(task.limits.network, task.limits.allowed_hosts)  # type: ignore[arg-type]  # limits made from the agent's PhaseNetwork (_limits): never "host"
    return [agent] if task.verifier_network is None else [agent, task.verifier_network]


def read_task(folder: Path, options: HarborOptions, allowed: NetworkAllowed) -> HarborTask:
    try:
        if (folder / "task.toml").is_file():
            return _harbor_task(folder, options, allowed)
        return _tb1_task(folder, options, allowed.internet)
    except ManifestError as e:
        prefix = f"task {folder.name}: "
        raise ManifestError(str(e) if str(e).startswith(prefix) else prefix + str(e)) from None


# -- Harbor ------------------------------------------------------------------------------
def _harbor_task(folder: Path, options: HarborOptions, allowed: NetworkAllowed) -> HarborTask:
    name = folder.name
    config = read_task_toml(folder / "task.toml")
    phases = phase_networks(config)
    for field_name, reason in (*task_toml_refusals(config), *refusals(config, phases, allowed)):
        raise ManifestError(f"task {name}: {folder / 'task.toml'}: {field_name}: {reason}")
    agent_network, verifier_network = phases["agent"], phases["verifier"]
    tests = folder / "tests"
    _require(name, folder / "instruction.md", "the prompt")
    _require(name, tests / "test.sh", "the verifier's script")
    env = config.environment
    image = task_image(
        name,
        folder / "environment",
        docker_image=env.docker_image,
        image_map=options.image_map,
        build_timeout_s=env.build_timeout_sec,
        build_missing=options.build_missing,
    )
    agent_user = _user(config.agent.user)
    verifier_user = _user(config.verifier.user)
    if verifier_user is None and agent_user is not None:
        verifier_user = image.default_user or "root"  # Harbor: the image's default USER
    return HarborTask(
        name=name,
        folder=folder,
        kind="harbor",
        instruction=_read(name, folder / "instruction.md"),
        image=image,
        limits=_limits(env.cpus, env.memory_mb, env.storage_mb, agent_network, options),
        agent_user=agent_user,
        workdir=env.workdir,
        env=resolve_env(name, "environment.env", env.env),
        agent_timeout_s=options.episode_timeout_s or config.agent.timeout_sec,
        verifier=HarborVerifier(
            tests_dir=tests,
            script="/tests/test.sh",
            extra_files=(),
            user=verifier_user,
            env=resolve_env(name, "verifier.env", config.verifier.env),
            timeout_s=config.verifier.timeout_sec,
        ),
        solution=_optional(folder / "solution" / "solve.sh"),
        solution_env=resolve_env(name, "solution.env", config.solution.env),
        verifier_network=None if verifier_network == agent_network else verifier_network,
    )


def _limits(
    cpus: float | None,
    memory_mb: int | None,
    storage_mb: int | None,
    network: PhaseNetwork,
    options: HarborOptions,
) -> SandboxLimits:
    """The task's resources, in Harbor's execution profile: Docker's default capabilities
    and a writable root, `storage_mb` a bound on what the task writes (not a read-only
    root); the command line's --cpus/--memory win over the task's."""
    memory = options.memory_bytes or (memory_mb or DEFAULT_MEMORY_MB) * MiB
    return SandboxLimits(
        cpus=options.cpus or cpus or 1.0,
        memory_bytes=memory,
        writable_layer_bytes=storage_mb * MiB if storage_mb else None,
        disk_bytes=None,  # set, so an operator's default disk bound (a read-only root) stays off
        network=network.network,
        allowed_hosts=network.allowed_hosts,
        privileges="runtime-default",
    )


# -- Terminal-Bench 1 ---------------------------------------------------------------------
def _tb1_task(folder: Path, options: HarborOptions, allow_network: bool) -> HarborTask:
    name = folder.name
    task = read_task_yaml(folder / "task.yaml")
    for field_name, reason in tb1_refusals(task):
        raise ManifestError(f"task {name}: {folder / 'task.yaml'}: {field_name}: {reason}")
    if not allow_network:
        raise ManifestError(
            f"task {name}: {folder / 'task.yaml'}: Terminal-Bench 1 tasks run with the "
            f"network; this server does not allow it (allow with {NETWORK_SETTING})"
        )
    run_tests = _require(name, folder / "run-tests.sh", "the test runner")
    image = task_image(
        name,
        folder,
        docker_image=None,
        image_map=options.image_map,
        build_timeout_s=1800.0,
    )
    return HarborTask(
        name=name,
        folder=folder,
        kind="terminal-bench-1",
        instruction=task.instruction,
        image=image,
        # Terminal-Bench 1 gives its client container the network and no limits.
        limits=_limits(None, None, None, PhaseNetwork(True), options),
        agent_user=None,
        workdir=None,
        env={"TEST_DIR": "/tests"},
        agent_timeout_s=options.episode_timeout_s or task.max_agent_timeout_sec,
        verifier=PytestVerifier(
            tests_dir=_optional(folder / "tests"),
            script="/tests/run-tests.sh",
            extra_files=(run_tests,),
            user=None,
            env={"TEST_DIR": "/tests"},
            timeout_s=task.max_test_timeout_sec,
        ),
        solution=_optional(folder / "solution.sh"),
    )


# -- helpers ------------------------------------------------------------------------------
def resolve_env(task: str, field_name: str, values: dict[str, str]) -> dict[str, str]:
    """Harbor's `${VAR}` and `${VAR:-default}`, from the host's environment. A missing
    variable names the task, the field and the variable (never a value)."""

    def substitute(key: str, text: str) -> str:
        def one(match: re.Match[str]) -> str:
            found = os.environ.get(match.group(1))
            if found is not None:
                return found
            if match.group(2) is not None:
                return match.group(2)
            raise ManifestError(
                f"task {task}: {field_name}.{key} needs ${{{match.group(1)}}}, which is not "
                "set in the server's environment"
            )

        return _TEMPLATE.sub(one, text)

    return {key: substitute(key, str(value)) for key, value in values.items()}


def _user(user: str | int | None) -> str | None:
    return None if user is None else str(user)


def _require(task: str, path: Path, what: str) -> Path:
    if not path.is_file():
        raise ManifestError(f"task {task}: {path.name} is missing ({what}: {path})")
    return path


def _optional(path: Path) -> Path | None:
    return path if path.exists() else None


def _read(task: str, path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise ManifestError(f"task {task}: cannot read {path}: {e}") from None
