"""`orsbox.toml`: an environment declared without Python.

    name, description, image, prompt, tools, workdir, env    the environment
    [build]      how to make `image` from a Dockerfile when it is missing
    [[splits]]   name, type, tasks (a JSONL or Parquet file)
    [limits]     per-call timeout and output cap; memory, cpus, pids, disk; network
                 (and allowed_hosts for network = "allowlist"), privileged, cap_add,
                 mounts (what widens these is operator policy)
    [setup]      host folders copied in, and a command run, before the first call;
                 `cache = true` saves each task's state after setup for later episodes
    [grader]     the command that sets the reward when the agent calls `submit`

The file is parsed with `tomllib` and validated by pydantic models that forbid unknown
fields, so a typo is an error rather than a silently ignored line. Every problem is
reported as `ManifestError("<file>: <field>: <problem>")`. Paths in a manifest are
relative to its folder and are checked here, at load, not when an episode needs them.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from orsbox.authoring.container import BASE_IMAGE
from orsbox.authoring.standard_tools import tool_mixins
from orsbox.errors import ManifestError
from orsbox.sandbox.base import (
    EXEC_TIMEOUT_S,
    OUTPUT_CAP_BYTES,
    HostMount,
    SandboxLimits,
    check_allowlist,
)
from orsbox.sandbox.sizes import parse_size

MANIFEST_NAME = "orsbox.toml"
NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"  # also a docker repository name component
PARAM_PATTERN = r"^[a-z][a-z0-9_]{0,62}$"

# Said after pydantic's "Field required" for fields whose purpose is not obvious.
MISSING_HINTS = {
    ("grader",): "every environment needs a [grader] table: the command whose exit code "
    "or JSON output sets the reward when the agent calls submit",
    ("splits",): "add at least one [[splits]] table with a name and a tasks file",
    ("prompt",): "the first message of every episode, filled from task fields: "
    'prompt = "Solve {question}"',
}


def _absolute_not_root(value: str) -> str:
    if not value.startswith("/") or value.rstrip("/") == "":
        raise ValueError("must be an absolute path other than /")
    return value.rstrip("/")


SandboxPath = Annotated[str, AfterValidator(_absolute_not_root)]  # a folder in the sandbox


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class SplitConfig(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    type: Literal["train", "validation", "test"] | None = Field(
        default=None, description="default: the name if it is train/validation/test"
    )
    tasks: str = Field(description="a .jsonl or .parquet file, relative to the manifest")


class BuildConfig(_Strict):
    dockerfile: str = "Dockerfile"
    context: str = "."
    base_image: str = Field(default=BASE_IMAGE, description="passed as build-arg BASE_IMAGE")


class MountConfig(_Strict):
    source: str = Field(min_length=1, description="host path, relative to the manifest's folder")
    target: SandboxPath = Field(description="absolute path in the sandbox")
    read_only: bool = True

    def host_mount(self, folder: Path) -> HostMount:
        source = (folder / self.source).resolve()
        return HostMount(source=str(source), target=self.target, read_only=self.read_only)


class LimitsConfig(_Strict):
    timeout_s: float = Field(default=EXEC_TIMEOUT_S, gt=0, description="per tool call")
    max_timeout_s: float = Field(default=600.0, gt=0, description="largest an agent may ask")
    output_bytes: int = Field(default=OUTPUT_CAP_BYTES, gt=0, description="per tool call")
    memory: int | str = Field(
        default="1g", validate_default=True, description='bytes, or "512m", "2g" ...'
    )
    cpus: float = Field(default=1.0, gt=0)
    pids: int = Field(default=512, gt=8)
    network: bool | Literal["host", "allowlist"] = Field(
        default=False,
        description='true: the internet (not the host or its private networks); "allowlist": '
        'only allowed_hosts, through an egress proxy; "host": the host\'s network',
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description='with network = "allowlist": host names, "*.domain" or addresses',
    )
    privileged: bool = False
    cap_add: list[str] = Field(default_factory=list, description="capabilities added back")
    mounts: list[MountConfig] = Field(
        default_factory=list, description="host paths bound in; read-only unless asked"
    )
    disk: int | str | None = Field(
        default=None, description="bound on each writable folder; the rest is read-only"
    )
    runtime: str | None = Field(
        default=None,
        description='isolation, e.g. "runsc" (gVisor); default: the server\'s; the operator '
        "must allow another",
    )

    @field_validator("memory")
    @classmethod
    def _memory(cls, value: int | str) -> int:
        return parse_size(value)

    @field_validator("disk")
    @classmethod
    def _disk(cls, value: int | str | None) -> int | None:
        return None if value is None else parse_size(value)

    @model_validator(mode="after")
    def _allowlist(self) -> LimitsConfig:
        check_allowlist(self.network, self.allowed_hosts)
        return self

    def sandbox_limits(self, folder: Path) -> SandboxLimits:
        """The limits, with mount sources made absolute from the manifest's `folder`."""
        return SandboxLimits(
            memory_bytes=int(self.memory),
            cpus=self.cpus,
            pids=self.pids,
            network=self.network,
            allowed_hosts=tuple(self.allowed_hosts),
            privileged=self.privileged,
            cap_add=tuple(self.cap_add),
            mounts=tuple(m.host_mount(folder) for m in self.mounts),
            disk_bytes=None if self.disk is None else int(self.disk),
            runtime=self.runtime,
        )


class SetupConfig(_Strict):
    copy_dirs: dict[str, str] = Field(
        default_factory=dict, alias="copy", description="host folder -> sandbox folder"
    )
    run: str | None = Field(default=None, description="bash command run after copying")
    user: str | None = Field(default=None, description="default: the image's user")
    timeout_s: float = Field(default=300.0, gt=0)
    cache: bool = Field(
        default=False,
        description="save each task's sandbox after a setup that succeeded and start its "
        "later episodes from it (the files only: processes started by run are not kept)",
    )


class GraderConfig(_Strict):
    command: str = Field(min_length=1, description="bash command run in the sandbox")
    files: str | None = Field(default=None, description="hidden folder, copied in to grade")
    path: SandboxPath = Field(default="/grader", description="where the hidden files go")
    user: str = Field(default="root", description="who runs the command")
    reward: Literal["exit_code", "json"] = "exit_code"
    timeout_s: float = Field(default=120.0, gt=0)
    every_step: bool = Field(default=False, description="also grade after every tool call")
    submit_params: list[str] | dict[str, str] = Field(
        default_factory=list, description="string parameters of submit: names or name = help"
    )

    @field_validator("submit_params")
    @classmethod
    def _params(cls, value: list[str] | dict[str, str]) -> list[str] | dict[str, str]:
        for name in value:
            if not re.match(PARAM_PATTERN, name) or name == "task" or name.startswith("task_"):
                raise ValueError(
                    f"{name!r} is not a valid parameter name (lower case letters, digits and "
                    "_; not task or task_*: those names are taken by ORSBOX_TASK_* variables)"
                )
        return value

    @property
    def param_help(self) -> dict[str, str]:
        if isinstance(self.submit_params, dict):
            return dict(self.submit_params)
        return {name: "" for name in self.submit_params}


class Manifest(_Strict):
    name: str = Field(pattern=NAME_PATTERN)
    description: str = ""
    image: str | None = Field(
        default=None,
        description=f"default: orsbox/env-<name>:latest with [build], else {BASE_IMAGE}",
    )
    build: BuildConfig | None = None
    prompt: str = Field(min_length=1)
    tools: list[str] = Field(default_factory=list)
    workdir: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    splits: list[SplitConfig] = Field(min_length=1)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    setup: SetupConfig = Field(default_factory=SetupConfig)
    grader: GraderConfig

    @field_validator("tools")
    @classmethod
    def _tools(cls, value: list[str]) -> list[str]:
        for name in value:
            if name == "submit":
                raise ValueError("submit is always there (it runs the grader); do not list it")
        tool_mixins(value)  # a name that is no standard tool: ValueError naming it
        return list(dict.fromkeys(value))

    @field_validator("splits")
    @classmethod
    def _unique_splits(cls, value: list[SplitConfig]) -> list[SplitConfig]:
        names = [s.name for s in value]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"split names must be unique; repeated: {', '.join(duplicates)}")
        return value

    @model_validator(mode="after")
    def _cache_needs_a_saved_disk(self) -> Manifest:
        if self.setup.cache and self.limits.disk is not None:
            raise ValueError(
                "setup.cache cannot be used with limits.disk: a disk-limited sandbox's "
                "writable folders live in memory, and a saved state would not hold them"
            )
        return self

    @property
    def image_tag(self) -> str:
        if self.image:
            return self.image
        return f"orsbox/env-{self.name}:latest" if self.build else BASE_IMAGE


# -- reading a manifest -----------------------------------------------------------------
def read_manifest(path: Path) -> Manifest:
    """Parse and validate `path` (an `orsbox.toml`), including the paths it names."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ManifestError(f"{path}: cannot read: {e.strerror or e}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ManifestError(f"{path}: invalid TOML: {e}") from None
    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as e:
        raise ManifestError("\n".join(f"{path}: {p}" for p in describe(e))) from None
    check_paths(manifest, path)
    return manifest


def describe(error: ValidationError) -> list[str]:
    """One `field: problem` line per pydantic error, with hints for the common ones."""
    lines = []
    for item in error.errors():
        loc = tuple(item["loc"])
        where = _dotted(loc) or "manifest"
        if item["type"] == "extra_forbidden":
            allowed = ", ".join(_allowed_fields(loc[:-1]))
            lines.append(f"{where}: unknown field; allowed here: {allowed}")
        elif item["type"] == "missing" and loc in MISSING_HINTS:
            lines.append(f"{where}: missing: {MISSING_HINTS[loc]}")
        else:
            message = str(item["msg"]).removeprefix("Value error, ")
            lines.append(f"{where}: {message}")
    return lines


def _dotted(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else str(part)
    return out


def _allowed_fields(loc: tuple[Any, ...]) -> list[str]:
    """The field names (aliases) valid at `loc`, walking the models from `Manifest`."""
    model: type[BaseModel] = Manifest
    for part in loc:
        if isinstance(part, int):
            continue
        field = next((f for n, f in model.model_fields.items() if (f.alias or n) == part), None)
        nested = _model_in(field.annotation) if field else None
        if nested is None:
            return []
        model = nested
    return sorted(f.alias or n for n, f in model.model_fields.items())


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def check_paths(manifest: Manifest, path: Path) -> None:
    """Every file and folder the manifest names exists (relative to its folder)."""
    folder = path.parent
    wanted: list[tuple[str, str, str]] = [
        (f"splits[{i}].tasks", s.tasks, "file") for i, s in enumerate(manifest.splits)
    ]
    wanted += [(f"setup.copy.{src!r}", src, "folder") for src in manifest.setup.copy_dirs]
    wanted += [
        (f"limits.mounts[{i}].source", m.source, "path")
        for i, m in enumerate(manifest.limits.mounts)
    ]
    if manifest.grader.files:
        wanted.append(("grader.files", manifest.grader.files, "folder"))
    if manifest.build:
        wanted.append(("build.dockerfile", manifest.build.dockerfile, "file"))
        wanted.append(("build.context", manifest.build.context, "folder"))
    for field, relative, kind in wanted:
        target = folder / relative
        checks = {"file": target.is_file, "folder": target.is_dir, "path": target.exists}
        exists = checks[kind]()
        if not exists:
            raise ManifestError(f"{path}: {field}: no such {kind}: {target}")
