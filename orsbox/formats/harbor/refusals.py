"""What orsbox cannot honour in a task, refused at load with the task, the field and why.

Every field of `task.toml` is read (`task_config.py`); this module lists the ones whose
value asks for something an orsbox sandbox cannot give. Serving such a task anyway would
grade it differently from Harbor, so it is refused instead of quietly ignored. Fields
that only describe the task (metadata, authors, keywords, artifacts collected for
people to read) are accepted: ignoring them changes no reward.
"""

from __future__ import annotations

from collections.abc import Iterator

from orsbox.formats.harbor.task_config import NetworkMode, TaskConfig, TB1Task
from orsbox.sandbox.base import check_allowed_host

HOSTS_WITHOUT_ALLOWLIST = 'allowed_hosts applies only to network_mode = "allowlist"'


def task_toml_refusals(config: TaskConfig) -> Iterator[tuple[str, str]]:
    """(field, reason) for each value of `config` that orsbox cannot honour."""
    env = config.environment
    if env.os != "linux":
        yield "environment.os", f"{env.os!r}: orsbox runs Linux containers only"
    if env.gpus:
        yield "environment.gpus", "orsbox sandboxes have no GPUs"
    if env.gpu_types:
        yield "environment.gpu_types", "orsbox sandboxes have no GPUs"
    if env.tpu is not None:
        yield "environment.tpu", "orsbox sandboxes have no TPUs"
    if env.mcp_servers:
        yield "environment.mcp_servers", "orsbox offers its own tools, not MCP servers"
    if env.skills_dir is not None:
        yield "environment.skills_dir", "orsbox has no agent skills directory to fill"
    if env.healthcheck is not None:
        yield "environment.healthcheck", "orsbox does not run readiness checks before setup"
    yield from _phase_refusals(config)
    if config.steps:
        yield "steps", "multi-step tasks are not supported (one episode, one verifier run)"
    if config.multi_step_reward_strategy is not None:
        yield "multi_step_reward_strategy", "multi-step tasks are not supported"


def _phase_refusals(config: TaskConfig) -> Iterator[tuple[str, str]]:
    """Network settings are honoured per phase (`phases.py`); refused are hosts that
    are not hosts, and hosts where no phase has an allow-list to use them."""
    env = config.environment
    listing = {
        phase: (getattr(config, phase).network_mode or env.network_mode) is NetworkMode.ALLOWLIST
        for phase in ("agent", "verifier")
    }
    listing["environment"] = any(listing.values())
    for name in ("environment", "agent", "verifier"):
        hosts = getattr(config, name).allowed_hosts or []
        if hosts and not listing[name]:
            yield f"{name}.allowed_hosts", HOSTS_WITHOUT_ALLOWLIST
        for host in hosts:
            try:
                check_allowed_host(host)
            except ValueError as e:
                yield f"{name}.allowed_hosts", str(e)
    verifier = config.verifier
    if verifier.environment_mode == "separate" or verifier.environment is not None:
        yield (
            "verifier.environment",
            "orsbox runs the verifier in the agent's sandbox (Harbor's 'shared' mode); a "
            "separate verifier container is not supported",
        )
    if verifier.collect:
        yield "verifier.collect", "collect hooks need compose services, which orsbox does not run"


def tb1_refusals(task: TB1Task) -> Iterator[tuple[str, str]]:
    if task.parser_name != "pytest":
        yield "parser_name", f"{task.parser_name!r}: only the pytest parser is supported"
    if task.run_tests_in_same_shell:
        yield (
            "run_tests_in_same_shell",
            "the tests run in a fresh shell after every process of the agent is killed",
        )
