"""The task files, read completely: Harbor's `task.toml` (schema 1.4, and the older
`version` key) and Terminal-Bench 1's `task.yaml`.

Written here rather than imported from the `harbor` package: harbor 0.26.0 needs Python
3.12 (orsbox runs on 3.11) and pulls in litellm, supabase, fastmcp and some 150 other
distributions (docs/harbor.md has the figures). Every field of the schema has a model;
unlike Harbor's own models, these forbid unknown fields, so a misspelt key is an error
naming the task and the field rather than a setting silently dropped. Whether orsbox can
honour what a field asks is decided in `refusals.py`, not here.
"""

from __future__ import annotations

import tomllib
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from orsbox.errors import ManifestError


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NetworkMode(StrEnum):
    NO_NETWORK = "no-network"
    PUBLIC = "public"
    ALLOWLIST = "allowlist"


class Author(_Strict):
    name: str
    email: str | None = None


class PackageInfo(_Strict):
    """`[task]`: the task's identity in Harbor's registry."""

    name: str
    version: str | None = None
    description: str = ""
    authors: list[Author] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)


class HealthcheckConfig(_Strict):
    command: str
    interval_sec: float = 5.0
    timeout_sec: float = 30.0
    start_period_sec: float = 0.0
    start_interval_sec: float = 5.0
    retries: int = 3


class TpuSpec(_Strict):
    type: str
    topology: str


class MCPServerConfig(_Strict):
    name: str
    transport: Literal["stdio", "sse", "streamable-http", "http"] = "sse"
    url: str | None = None
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    headers: dict[str, str] = Field(default_factory=dict)


class _PhaseNetwork(_Strict):
    network_mode: NetworkMode | None = None
    allowed_hosts: list[str] | None = None


class AgentConfig(_PhaseNetwork):
    timeout_sec: float | None = Field(default=None, gt=0)
    user: str | int | None = None


def _size_mb(text: str) -> int:
    """Harbor's legacy `memory = "2G"` / `storage = "512M"` sizes, in MB."""
    value, unit = text.strip()[:-1], text.strip()[-1:].upper()
    factor = {"G": 1024.0, "M": 1.0, "K": 1 / 1024}.get(unit)
    if factor is None:
        raise ValueError(f"size {text!r} is not like '1G' or '512M'")
    return int(float(value) * factor)


class EnvironmentConfig(_Strict):
    build_timeout_sec: float = Field(default=600.0, gt=0)
    docker_image: str | None = None
    os: Literal["linux", "windows"] = "linux"
    cpus: float | None = Field(default=None, gt=0)
    memory_mb: int | None = Field(default=None, gt=0)
    storage_mb: int | None = Field(default=None, gt=0)
    gpus: int | None = Field(default=None, ge=0)
    gpu_types: list[str] | None = None
    tpu: TpuSpec | None = None
    mcp_servers: list[MCPServerConfig] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    skills_dir: str | None = None
    healthcheck: HealthcheckConfig | None = None
    workdir: str | None = None
    network_mode: NetworkMode = NetworkMode.PUBLIC
    allowed_hosts: list[str] | None = None
    allow_internet: bool | None = None  # deprecated: network_mode

    @model_validator(mode="before")
    @classmethod
    def _legacy_fields(cls, data: Any) -> Any:
        """`memory`/`storage` as sizes and `allow_internet`, as Harbor migrates them."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for old, new in (("memory", "memory_mb"), ("storage", "storage_mb")):
            if isinstance(data.get(old), str):
                data.setdefault(new, _size_mb(data.pop(old)))
        allow = data.get("allow_internet")
        if allow is not None and "network_mode" not in data:
            data["network_mode"] = "public" if allow else "no-network"
        os_name = data.get("os")
        if isinstance(os_name, str):
            data["os"] = os_name.lower()
        return data


class VerifierCollectConfig(_Strict):
    command: str
    service: str = "main"
    timeout_sec: float = 60.0
    user: str | int | None = None


class VerifierConfig(_PhaseNetwork):
    timeout_sec: float = Field(default=600.0, gt=0)
    env: dict[str, str] = Field(default_factory=dict)
    user: str | int | None = None
    environment_mode: Literal["shared", "separate"] | None = None
    environment: EnvironmentConfig | None = None
    collect: list[VerifierCollectConfig] = Field(default_factory=list)


class SolutionConfig(_Strict):
    env: dict[str, str] = Field(default_factory=dict)


class ArtifactConfig(_Strict):
    source: str
    destination: str | None = None
    exclude: list[str] = Field(default_factory=list)
    service: str | None = None


class StepConfig(_Strict):
    name: str
    agent: AgentConfig = Field(default_factory=AgentConfig)
    verifier: VerifierConfig = Field(default_factory=VerifierConfig)
    min_reward: float | dict[str, float] | None = None
    healthcheck: HealthcheckConfig | None = None
    artifacts: list[str | ArtifactConfig] = Field(default_factory=list)


class TaskConfig(_Strict):
    """A whole `task.toml`."""

    schema_version: str = "1.4"
    task: PackageInfo | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    verifier: VerifierConfig = Field(default_factory=VerifierConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    environment: EnvironmentConfig = Field(default_factory=EnvironmentConfig)
    solution: SolutionConfig = Field(default_factory=SolutionConfig)
    source: str | None = None
    multi_step_reward_strategy: Literal["mean", "final"] | None = None
    steps: list[StepConfig] | None = None
    artifacts: list[str | ArtifactConfig] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _version_rename(cls, data: Any) -> Any:
        """Schemas before 1.0 called `schema_version` `version`."""
        if isinstance(data, dict) and "version" in data:
            data = dict(data)
            data.setdefault("schema_version", str(data.pop("version")))
        return data


class TB1Task(_Strict):
    """A whole Terminal-Bench 1 `task.yaml` (terminal-bench 0.2.18's `Task`)."""

    instruction: str
    author_name: str = "unknown"
    author_email: str = "unknown"
    difficulty: Literal["easy", "medium", "hard", "unknown"]
    category: str = "software_engineering"
    tags: list[str] = Field(default_factory=list)
    parser_name: str = "pytest"
    max_agent_timeout_sec: float = Field(default=360.0, gt=0)
    max_test_timeout_sec: float = Field(default=60.0, gt=0)
    run_tests_in_same_shell: bool = False
    disable_asciinema: bool = False
    estimated_duration_sec: float | None = None
    expert_time_estimate_min: int | None = None
    junior_time_estimate_min: int | None = None


def _explain(path: Path, error: ValidationError) -> ManifestError:
    """One line per problem: the field's dotted path and what is wrong with it."""
    problems = []
    for item in error.errors():
        field = ".".join(str(p) for p in item["loc"]) or "(top level)"
        if item["type"] == "extra_forbidden":
            problems.append(f"{field}: unknown field (not in the schema)")
        else:
            problems.append(f"{field}: {item['msg']}")
    return ManifestError(f"{path}: " + "; ".join(problems))


def read_task_toml(path: Path) -> TaskConfig:
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ManifestError(f"{path}: not valid TOML: {e}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ManifestError(f"{path}: cannot read it: {e}") from None
    try:
        return TaskConfig.model_validate(data)
    except ValidationError as e:
        raise _explain(path, e) from None


def read_task_yaml(path: Path) -> TB1Task:
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ManifestError(f"{path}: not valid YAML: {e}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ManifestError(f"{path}: cannot read it: {e}") from None
    if not isinstance(data, dict):
        raise ManifestError(f"{path}: expected a mapping of fields, got {type(data).__name__}")
    try:
        return TB1Task.model_validate(data)
    except ValidationError as e:
        raise _explain(path, e) from None
