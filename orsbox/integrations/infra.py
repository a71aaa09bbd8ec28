"""Tell infrastructure failures apart in any trainer that plays ORS through the
`openreward` client (docs/infra-failures.md, docs/trainers.md).

The trainers' own ORS classes (SkyRL's and ROLL's `OpenRewardEnv`, the cookbook's
slime/Miles `generate.py`) catch a failed `call_tool` and go on: the failure becomes
text the model reads and, in the end, a reward of 0.0 that is trained on. The error's
text carries orsbox's `[infra]` marker when the model is not to blame, but the classes
drop it. These wrappers keep it, without changing what the trainer's class sees:

* `InfraWatch(session)`: a session (the sync `Session` or the `AsyncSession`) whose
  calls pass through unchanged and whose first marked failure is kept in
  `infra_error`. A subclass of the trainer's class wraps its session with it.
* `watch_client(client)` and `infra_scope()`: for code that opens its sessions from
  a client shared by concurrent rollouts (the cookbook's `generate.py`): every session
  the wrapped client opens is watched, and the failure goes to the `infra_scope()`
  the rollout runs in (a context variable, so each asyncio task has its own).

What to do with a marked rollout is the trainer's: docs/trainers.md gives the few
lines for each. For slime and Miles they are here: `mask_infra_generate(module)` wraps
the cookbook's `generate` and sets `sample.remove_sample` on such a rollout.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import json
import os
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from orsbox.client import is_infra


class InfraScope:
    """One rollout's record: the first marked failure of any session watched in it."""

    def __init__(self) -> None:
        self.infra_error: str | None = None

    @property
    def infra_failed(self) -> bool:
        return self.infra_error is not None

    def note(self, error: BaseException | str) -> None:
        """Keep `error` if it is the first not the model's: its text carries the
        `[infra]` marker (a tool call's error), or it is an HTTP 5xx answer (a session
        whose setup failed answers its first request so, `"infra": true` in a body the
        client does not show)."""
        text = str(error)
        status = getattr(error, "status", None)
        server_failed = isinstance(status, int) and 500 <= status < 600
        if self.infra_error is None and (is_infra(text) or server_failed):
            self.infra_error = text if is_infra(text) else f"HTTP {status}: {text}"


_SCOPE: contextvars.ContextVar[InfraScope | None] = contextvars.ContextVar(
    "orsbox_infra_scope", default=None
)


@contextlib.contextmanager
def infra_scope() -> Iterator[InfraScope]:
    """The record of the sessions a `watch_client` client opens inside the block."""
    scope = InfraScope()
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)


class InfraWatch(InfraScope):
    """An openreward session whose methods note a failure that is not the model's
    (then raise it as before); every attribute is the session's. The first such
    failure is kept: the client marks the session dead after it, so the calls that
    follow fail with `SessionTerminatedError`, which carries no marker."""

    def __init__(self, session: Any, scope: InfraScope | None = None) -> None:
        super().__init__()
        self.session = session
        self._scope = scope

    def note(self, error: BaseException | str) -> None:
        super().note(error)
        if self._scope is not None:
            self._scope.note(error)

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.session, name)
        if not callable(attribute):
            return attribute
        if inspect.iscoroutinefunction(attribute):

            async def watched_async(*args: Any, **kwargs: Any) -> Any:
                try:
                    return await attribute(*args, **kwargs)
                except Exception as e:
                    self.note(e)
                    raise

            return watched_async

        def watched(*args: Any, **kwargs: Any) -> Any:
            try:
                return attribute(*args, **kwargs)
            except Exception as e:
                self.note(e)
                raise

        return watched


class _Watched:
    """Wraps what the client hands out, down to the entered session."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _WatchedSession(_Watched):
    """`env.session(...)`: entering it gives an `InfraWatch` of the session."""

    def __enter__(self) -> InfraWatch:
        return InfraWatch(self._inner.__enter__(), _SCOPE.get())

    def __exit__(self, *exc: Any) -> Any:
        return self._inner.__exit__(*exc)

    async def __aenter__(self) -> InfraWatch:
        return InfraWatch(await self._inner.__aenter__(), _SCOPE.get())

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._inner.__aexit__(*exc)


class _WatchedEnvironment(_Watched):
    def session(self, *args: Any, **kwargs: Any) -> _WatchedSession:
        return _WatchedSession(self._inner.session(*args, **kwargs))


class _WatchedEnvironments(_Watched):
    def get(self, *args: Any, **kwargs: Any) -> _WatchedEnvironment:
        return _WatchedEnvironment(self._inner.get(*args, **kwargs))


class _WatchedClient(_Watched):
    @property
    def environments(self) -> _WatchedEnvironments:
        return _WatchedEnvironments(self._inner.environments)


def watch_client(client: Any) -> Any:
    """`client` (`OpenReward` or `AsyncOpenReward`) whose sessions, once entered, are
    `InfraWatch`es reporting to the `infra_scope()` around them. Wrapping twice is
    wrapping once."""
    return client if isinstance(client, _WatchedClient) else _WatchedClient(client)


def mask_infra_generate(module: Any) -> Callable[..., Awaitable[Any]]:
    """slime's and Miles's `generate(args, sample, sampling_params)` from the
    OpenRewardAI cookbook's `generate.py` (`module`), with the rollouts whose
    infrastructure failed left out of the loss: `sample.remove_sample` set and the
    failure in the sample's metadata as `infra_error`. It watches the module's shared
    client (`module._state.or_client`, made as the cookbook makes it when not yet made)
    and runs each rollout in an `infra_scope()`. docs/trainers.md#slime-and-miles."""

    async def generate(args: Any, sample: Any, sampling_params: Any) -> Any:
        state = module._state
        if state.or_client is None:
            from openreward import AsyncOpenReward

            state.or_client = AsyncOpenReward(api_key=os.environ["OPENREWARD_API_KEY"])
        state.or_client = watch_client(state.or_client)
        with infra_scope() as scope:
            sample = await module.generate(args, sample, sampling_params)
        if scope.infra_error is not None:
            sample.remove_sample = True
            meta = json.loads(sample.metadata)
            sample.metadata = json.dumps({**meta, "infra_error": scope.infra_error})
        return sample

    return generate
