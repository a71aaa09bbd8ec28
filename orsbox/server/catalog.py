"""The environments a server hosts, and the task questions asked of them.

Names are matched case-insensitively. Which environment a request means (`resolve`):
the one its path (or `/create`'s `env_name`) names; else the one its `X-Deployment`
header names (the `openreward` client, and so TRL's adapter, calls bare paths such as
`/tools` and `/call` and names the environment only there, as `NAME` or `owner/NAME`);
else the default. A server of one environment defaults to it; a server of several has a
default only when the operator named one (`ORSBOX_DEFAULT_ENVIRONMENT`), and otherwise
answers a request that names no environment with a 400 listing them (`NoEnvironmentNamed`):
never some environment the client did not ask for. TRL's adapter without `env_name`
sends `X-Deployment: env` ("any name: a single-environment server"), which is read as
naming none. Splits and indices are checked here so every endpoint answers a bad one
the same way.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence

from orsbox.authoring import Environment, as_split, find_tools
from orsbox.authoring.user_code import call_user
from orsbox.errors import BadRequest, NotFound
from orsbox.protocol.types import JSONObject, Split

# What TRL's adapter sends as `X-Deployment` without `env_name` (trl 1.16.0: "self-hosted
# single-env URL, pass any name"): it names no environment.
PLACEHOLDER_DEPLOYMENT = "env"
DEFAULT_SETTING = "ORSBOX_DEFAULT_ENVIRONMENT"


class Catalog:
    """`default`: the environment for requests that name none (the operator's
    `ORSBOX_DEFAULT_ENVIRONMENT`); without it, the only one served, or none."""

    def __init__(
        self, environments: Sequence[type[Environment]], default: str | None = None
    ) -> None:
        if not environments:
            raise ValueError("a server needs at least one environment")
        self._envs: dict[str, type[Environment]] = {}
        for env_cls in environments:
            self._add(env_cls)
        self._default = None if default is None else default.strip().lower() or None
        if self._default is not None and self._default not in self._envs:
            raise ValueError(
                f"{DEFAULT_SETTING}={default!r} is not served here; environments: "
                f"{', '.join(self.names)}"
            )

    def _add(self, env_cls: type[Environment]) -> None:
        if not (inspect.isclass(env_cls) and issubclass(env_cls, Environment)):
            raise TypeError(f"{env_cls!r} is not an orsbox Environment subclass")
        key = env_cls.name().lower()
        if key in self._envs:
            raise ValueError(f"two environments are named {key!r}")
        if not find_tools(env_cls) and not env_cls.list_tools().tools:
            raise ValueError(f"environment {key!r} has no tools; add at least one @tool")
        self._envs[key] = env_cls

    @property
    def names(self) -> list[str]:
        return list(self._envs)

    @property
    def default(self) -> str | None:
        """The environment of requests that name none; None on a server of several
        without an explicit default."""
        if self._default is not None:
            return self._default
        return self.names[0] if len(self._envs) == 1 else None

    def _the_default(self) -> str:
        if self.default is None:
            raise NoEnvironmentNamed(self.names)
        return self.default

    def resolve(self, named: str | None, deployment: str | None, *, variant: bool = False) -> str:
        """The served environment a request means: `named` by its path or body, else
        the one its `X-Deployment` header names, else the default.

        A header naming no served environment is a 404 for a request that names none
        (never the default: a trainer would train on the wrong task with no error). A
        header naming one served environment while the path names another is a 400.
        A header naming nothing served beside a path that names an environment is
        left alone: the openreward client sends its deployment's name there, with the
        environment as a variant in the path. With `variant` (a request from that
        client) the header is its deployment's name even when an environment here has
        that name too: `environments.get("math", variant="coding")` means coding."""
        wanted = deployment_environment(deployment)
        if wanted == PLACEHOLDER_DEPLOYMENT and wanted not in self._envs:
            wanted = ""  # TRL's adapter without env_name: names none
        if named is not None:
            key, _ = self.get(named)
            if not variant and wanted and wanted in self._envs and wanted != key:
                raise BadRequest(
                    f"X-Deployment {deployment!r} names environment {wanted!r} but the "
                    f"request names {key!r}; name one environment (served: "
                    f"{', '.join(self.names)})"
                )
            return key
        if not wanted:
            return self._the_default()
        if wanted not in self._envs:
            raise NotFound(
                f"X-Deployment {deployment!r} names no environment served here; "
                f"environments: {', '.join(self.names)}"
            )
        return wanted

    def get(self, name: str | None) -> tuple[str, type[Environment]]:
        key = (name or self._the_default()).lower()
        env_cls = self._envs.get(key)
        if env_cls is None:
            raise NotFound(f"unknown environment {name!r}; environments: {', '.join(self.names)}")
        return key, env_cls

    # -- tasks ----------------------------------------------------------------------
    async def splits(self, env_cls: type[Environment]) -> list[Split]:
        return [as_split(s) for s in await call_user(env_cls.list_splits)]

    async def check_split(self, env_cls: type[Environment], split: str) -> None:
        names = [s.name for s in await self.splits(env_cls)]
        if split not in names:
            raise BadRequest(f"unknown split {split!r}; splits: {', '.join(names)}")

    async def tasks(self, env_cls: type[Environment], split: str) -> list[JSONObject]:
        await self.check_split(env_cls, split)
        try:
            return list(await call_user(env_cls.list_tasks, split))
        except NotImplementedError as e:
            raise BadRequest(f"{e}") from e

    async def num_tasks(self, env_cls: type[Environment], split: str) -> int:
        await self.check_split(env_cls, split)
        return int(await call_user(env_cls.num_tasks, split))

    async def task(self, env_cls: type[Environment], split: str, index: int) -> JSONObject:
        await self.check_split(env_cls, split)
        try:
            return await call_user(env_cls.get_task, split, index)
        except IndexError as e:
            total = await call_user(env_cls.num_tasks, split)
            raise BadRequest(
                f"index {index} is out of range for split {split!r} ({total} tasks)"
            ) from e

    async def task_range(
        self, env_cls: type[Environment], split: str, start: int | None, stop: int | None
    ) -> list[JSONObject]:
        await self.check_split(env_cls, split)
        try:
            return list(await call_user(env_cls.get_task_range, split, start, stop))
        except IndexError as e:
            raise BadRequest(f"invalid range {start}:{stop} for split {split!r}") from e


class NoEnvironmentNamed(BadRequest):
    """A request that names no environment, on a server of several without a default."""

    def __init__(self, names: list[str]) -> None:
        super().__init__(
            f"this server serves several environments and the request names none; name "
            f"one of: {', '.join(names)} (env_name in /create, the path /NAME/..., or the "
            f"X-Deployment header; the ors-sdk client names it with "
            f"session(task=env.get_task(split, index))), or the operator sets "
            f"{DEFAULT_SETTING}"
        )


def deployment_environment(header: str | None) -> str:
    """The environment name an `X-Deployment` header gives, lower-cased: the header
    itself, or the last part of `owner/NAME` (the hosted platform's form); "" for none."""
    return (header or "").strip().rsplit("/", 1)[-1].strip().lower()
