"""The options `serve`, `run`, `build`, `check` and `eval` share for benchmark datasets,
derived from the formats' own options (`orsbox.formats.options`): every field of
`FormatOptions`, then each listed format's own (`orsbox.formats.registry.FORMATS`), is
a flag with the field's description as its help, so a new format's options appear here
without a line of this module changing. They reach the command as one `FormatOptions`."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar, get_type_hints

import typer
from pydantic import ValidationError
from pydantic.fields import FieldInfo

from orsbox.errors import ManifestError
from orsbox.formats import registry
from orsbox.formats.options import Flag, FormatOptions

__all__ = ["FormatOptions", "format_options", "with_dataset_options"]

PARAMETER_PREFIX = "dataset_"  # the Python names of the flags, apart from a command's own


@dataclass(frozen=True)
class DatasetFlag:
    """One field of the formats' options as a command-line flag."""

    field: str
    info: FieldInfo

    @property
    def spec(self) -> Flag:
        return next((m for m in self.info.metadata if isinstance(m, Flag)), Flag())

    @property
    def flag(self) -> str:
        return self.spec.name or "--" + self.field.replace("_", "-")

    @property
    def key(self) -> str:
        """The flag as a Python name (`--dataset-split`: `dataset_split`)."""
        return self.flag.removeprefix("--").replace("-", "_")

    @property
    def typed(self) -> Any:
        return self.spec.typed or self.info.annotation

    def parameter(self) -> inspect.Parameter:
        default = False if self.typed is bool else None
        option = typer.Option(self.flag, help=self.info.description, rich_help_panel=panel())
        return inspect.Parameter(
            PARAMETER_PREFIX + self.key,
            inspect.Parameter.KEYWORD_ONLY,
            default=default,
            annotation=Annotated[self.typed, option],
        )

    def read(self, value: Any) -> Any:
        """The field's value from what was typed (None: not given)."""
        if self.spec.read is None:
            return value
        try:
            return self.spec.read(value)
        except (ManifestError, ValueError) as e:
            raise typer.BadParameter(str(e), param_hint=self.flag) from None


def dataset_flags() -> list[DatasetFlag]:
    """Every format's options as flags: the shared ones first, then each format's own."""
    fields = dict(FormatOptions.model_fields)
    for found in registry.FORMATS:
        fields.update({name: found.options.model_fields[name] for name in found.own_fields()})
    return [DatasetFlag(name, info) for name, info in fields.items()]


def panel() -> str:
    return f"Benchmark datasets ({', '.join(f'{f.prefix}:PATH' for f in registry.FORMATS)}, task folders)"


def format_options(**given: Any) -> FormatOptions:
    """The options as one model from the flags' values, named as the flags are
    (`dataset_split="dev"`, `memory="4g"`; those not given left out); a bad value is a
    `typer.BadParameter` naming its flag."""
    flags = {f.field: f for f in dataset_flags()}
    unknown = set(given) - {f.key for f in flags.values()}
    if unknown:
        raise TypeError(f"no dataset option {', '.join(sorted(unknown))}")
    typed = {name: flag.read(given.get(flag.key)) for name, flag in flags.items()}
    values = {name: value for name, value in typed.items() if value is not None}
    try:
        options = FormatOptions(**values)
        for found in registry.FORMATS:  # each format's own fields checked now, not at load
            found.options.model_validate(
                {k: v for k, v in values.items() if k in found.options.model_fields}
            )
    except ValidationError as e:
        error = e.errors()[0]
        flag = flags[str(error["loc"][0])].flag if error["loc"] else None
        raise typer.BadParameter(error["msg"], param_hint=flag) from None
    return options


F = TypeVar("F", bound=Callable[..., Any])


def with_dataset_options(command: F) -> F:
    """Give a command the dataset options: typer sees them as its own parameters, and
    the command receives them as one `dataset: FormatOptions` keyword argument."""
    signature = inspect.signature(command)
    hints = get_type_hints(command, include_extras=True)  # typer reads the wrapper's
    own = [
        p.replace(annotation=hints.get(p.name, p.annotation))
        for p in signature.parameters.values()
        if p.name != "dataset"
    ]
    extra = [flag.parameter() for flag in dataset_flags()]
    clash = {p.name for p in extra} & {p.name for p in own}
    if clash:
        raise TypeError(f"dataset options {clash} clash with {command.__name__}'s own options")

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        given = {p.name.removeprefix(PARAMETER_PREFIX): kwargs.pop(p.name) for p in extra}
        return command(*args, dataset=format_options(**given), **kwargs)

    del wrapper.__wrapped__  # typer must read the signature below, not the original's
    wrapper.__annotations__ = {p.name: p.annotation for p in [*own, *extra]}
    wrapper.__signature__ = signature.replace(parameters=[*own, *extra], return_annotation=None)  # type: ignore[attr-defined]  # typer reads it; mypy knows no such attribute on functions
    return wrapper  # type: ignore[return-value]  # F, with other options: typer reads the signature
