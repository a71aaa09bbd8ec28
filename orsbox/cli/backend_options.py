"""CLI flags for the sandbox backend, taken from the selected backend's config: the
fields its class names in `flags` (Docker: `--runtime`, `--engine`), each with the
field's description as its help, so the flags and ORSBOX_BACKEND never drift apart.
The selected backend is the one ORSBOX_BACKEND (or ORSBOX_BACKEND_FILE) names when the
command line is read, Docker by default."""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, get_type_hints

import typer

from orsbox.sandbox.config import with_options
from orsbox.settings import Settings

if TYPE_CHECKING:
    from orsbox.sandbox.backend_config import BackendConfig
    from orsbox.sandbox.base import SandboxBackend

PLACEHOLDER = "backend_flags"  # the parameter the flags stand in for
BackendFlags = dict[str, Any]  # the flags given (None: not given), by field name
F = TypeVar("F", bound=Callable[..., Any])


def selected_backend() -> type[BackendConfig]:
    """The config class of the backend the settings select."""
    return type(Settings().backend)


def flag_parameters(config: type[BackendConfig]) -> list[inspect.Parameter]:
    """One typer option per field the backend offers as a flag."""
    fields = config.model_fields
    return [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            default=None,
            annotation=Annotated[
                fields[name].annotation,
                typer.Option(help=fields[name].description, show_default=False),
            ],
        )
        for name in config.flags
    ]


def with_backend_options(command: F) -> F:
    """Give a command the selected backend's flags where its `backend_flags` parameter
    stands (so --help lists them there); the command receives them as one
    `backend_flags` dict for `with_backend`."""
    signature = inspect.signature(command)
    hints = get_type_hints(command, include_extras=True)  # typer reads the wrapper's
    flags = flag_parameters(selected_backend())
    clash = {p.name for p in flags} & set(signature.parameters)
    if clash:
        raise TypeError(f"backend flags {clash} clash with {command.__name__}'s own options")
    parameters: list[inspect.Parameter] = []
    for p in signature.parameters.values():
        if p.name == PLACEHOLDER:
            parameters += [flag.replace(kind=p.kind) for flag in flags]
        else:
            parameters.append(p.replace(annotation=hints[p.name]))

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        given = {p.name: kwargs.pop(p.name, None) for p in flags}
        return command(*args, **{PLACEHOLDER: given}, **kwargs)

    del wrapper.__wrapped__  # typer must read the signature below, not the original's
    wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
    wrapper.__signature__ = signature.replace(parameters=parameters, return_annotation=None)  # type: ignore[attr-defined]  # typer reads it; mypy knows no such attribute on functions
    return wrapper  # type: ignore[return-value]  # F, with other flags: typer reads the signature


def with_backend(settings: Settings, flags: BackendFlags | None) -> Settings:
    """`settings` with the backend flags given laid over its backend's config."""
    backend = with_options(settings.backend, **(flags or {}))
    return (
        settings
        if backend is settings.backend
        else settings.model_copy(update={"backend": backend})
    )


def cli_backend() -> SandboxBackend:
    """The configured backend (ORSBOX_BACKEND), for a command that lists or removes
    sandboxes; it starts none, so closing it touches no one's sandboxes."""
    from orsbox.sandbox import create_backend

    return create_backend(Settings().backend, server_id=f"cli-{os.getpid()}")
