"""The factory: which backends there are, which one a configuration names, and making it.

`Settings.backend` holds one backend's config (`orsbox.sandbox.backend_config`): set it
as JSON in `ORSBOX_BACKEND` (`{"type": "docker", "runtime": "runsc"}`), in a TOML or
JSON file (`load_config_file`), or through the CLI flags the selected backend's config
offers (`orsbox serve --runtime runsc --engine unix:///var/run/other.sock`).
`create_backend(config)` makes the backend it names; the backend's heavy modules are
imported only then (the docker SDK is heavy).

`BACKENDS` is the one place the backends are listed: a new backend is its package and
one entry here. Nothing else in orsbox names a backend's config class.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from orsbox.errors import SandboxError
from orsbox.sandbox.backend_config import BackendConfig
from orsbox.sandbox.docker.config import DockerConfig
from orsbox.sandbox.fake import FakeConfig
from orsbox.sandbox.operator_options import OperatorOptions, gives_options

if TYPE_CHECKING:
    from orsbox.sandbox.base import SandboxBackend

# Every backend's config class, the default first (a config without a `type` names it).
BACKENDS: tuple[type[BackendConfig], ...] = (DockerConfig, FakeConfig)
T = TypeVar("T")


def backend_classes() -> dict[str, type[BackendConfig]]:
    """Each backend's config class by its `type` tag."""
    return {cls.tag(): cls for cls in BACKENDS}


def default_config() -> BackendConfig:
    """The default backend's config, as configured by nothing (Docker's local engine)."""
    return BACKENDS[0].model_validate({})


def parse_config(data: object) -> BackendConfig:
    """A config from its dict form (`type` chooses the model; the default when absent).
    Raises ValueError (a pydantic `ValidationError` for a bad field) naming what is wrong."""
    if isinstance(data, BackendConfig):
        return data
    if not isinstance(data, dict):
        raise ValueError(f"a backend config is an object with a type, not {data!r}")
    known = backend_classes()
    tag = data.get("type", BACKENDS[0].tag())
    if tag not in known:
        raise ValueError(f"backend type {tag!r} is none of {', '.join(known)}")
    return known[tag].model_validate({**data, "type": tag})


def load_config_file(path: Path) -> BackendConfig:
    """A backend config from a .toml or .json file (a TOML file may hold it under
    `[backend]`)."""
    text = path.read_text()
    data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    return parse_config(data.get("backend", data) if isinstance(data, dict) else data)


def configured() -> BackendConfig:
    """The backend the environment configures, as the server reads it (`Settings.backend`):
    the file `ORSBOX_BACKEND_FILE` names, else the JSON in `ORSBOX_BACKEND`, else the
    default. For what runs without the server's settings (the harness integrations)."""
    path = os.environ.get("ORSBOX_BACKEND_FILE")
    if path:
        return load_config_file(Path(path))
    text = os.environ.get("ORSBOX_BACKEND")
    return parse_config(json.loads(text)) if text else default_config()


def with_options(config: BackendConfig | None, **given: Any) -> BackendConfig:
    """`config` (None: the default backend's) with the options given laid over it: the
    CLI's backend flags, a harness integration's `engine` or `runtime`. None means not
    given; an option the backend has no field for is a `SandboxError` naming it."""
    config = config or default_config()
    given = {k: v for k, v in given.items() if v is not None}
    unknown = sorted(set(given) - set(type(config).model_fields))
    if unknown:
        raise SandboxError(
            f"the {config.type} backend has no option {', '.join(unknown)} (ORSBOX_BACKEND)"
        )
    if not given:
        return config
    return type(config).model_validate({**config.model_dump(), **given})


def create_backend(
    config: BackendConfig | None = None,
    *,
    server_id: str | None = None,
    start_concurrency: int | None = None,
) -> SandboxBackend:
    """The backend `config` describes (default: Docker on the default engine), behind
    the operator's options it gives (`orsbox.sandbox.operator_options`): whatever the
    backend, its sandboxes start from mapped images with the default limits, and the
    runtimes allowed are offered."""
    config = config or default_config()
    backend = config.create(server_id=server_id, start_concurrency=start_concurrency)
    return OperatorOptions(backend, config) if gives_options(config) else backend


def with_backend(
    config: BackendConfig | None,
    work: Callable[[SandboxBackend], Awaitable[T]],
    *,
    server_id: str | None = None,
) -> T:
    """`await work(backend)` on a backend made for `config`, from synchronous code (the
    CLI: its image store, its health); the backend is closed afterwards."""
    import anyio

    async def run() -> T:
        backend = create_backend(config, server_id=server_id)
        try:
            return await work(backend)
        finally:
            await backend.close()

    return anyio.run(run)
