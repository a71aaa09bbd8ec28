"""What a user may say about a benchmark dataset: the models `serve`, `run`, `build`,
`check` and `eval` derive their dataset flags from (`orsbox.cli.dataset_options`).

`FormatOptions` holds what every format takes. A format's own options are a subclass
declared with the format (`SWEBenchOptions`: `--instances`, `--hints` ...); the command
line offers every listed format's fields and hands one `FormatOptions` down, the
formats' own values carried as its extra fields, and a loader reads its own with
`options.of(TheFormatsOptions)`, which checks them.

A field is the flag named after it (`image_template`: `--image-template`), with its
description as help, unless a `Flag` in its annotation says otherwise: the flag's name,
what is typed (a comma-separated string, repeated values) and how that is read.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from orsbox.errors import ManifestError
from orsbox.sandbox.image_map import ImageMap

# The standard tools a dataset's agent gets unless `--tools` names others.
DEFAULT_TOOLS = ("bash", "read_file", "write_file", "edit_file", "list_dir")

_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}

Options = TypeVar("Options", bound="FormatOptions")


@dataclass(frozen=True)
class Flag:
    """How an option is typed on the command line, where that is not its field's name
    and type: `name` (default `--field-name`), `typed` (what the user types, default the
    field's type) and `read` (the typed value, None when not given, to the field's
    value, None for unset; a `ValueError` or `ManifestError` for a bad one)."""

    name: str | None = None
    typed: Any = None
    read: Callable[[Any], Any] | None = None


def parse_memory(text: str) -> int:
    """`4g`, `512m`, `2GiB`, `1073741824` -> bytes; a `ManifestError` otherwise."""
    match = _MEMORY.match(text)
    if not match:
        raise ManifestError(f"memory {text!r} is not a size like 4g, 512m or 2GiB")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def read_names(text: str | None) -> tuple[str, ...] | None:
    """A comma-separated list (`bash, read_file`), blanks dropped."""
    return tuple(part.strip() for part in text.split(",") if part.strip()) if text else None


def read_instance_ids(values: list[str] | None) -> tuple[str, ...] | None:
    """`--instances` values: ids, comma-separated ids, or `@file` / a path to a file of
    ids (one a line, `#` comments)."""
    if not values:
        return None
    ids: list[str] = []
    for value in values:
        path = Path(value.removeprefix("@"))
        if value.startswith("@") or (path.suffix in (".txt", ".ids") and path.is_file()):
            try:
                lines = path.read_text().splitlines()
            except OSError as e:
                raise ManifestError(f"cannot read instance ids from {path}: {e.strerror}") from None
            ids += [ln.split("#")[0].strip() for ln in lines if ln.split("#")[0].strip()]
        else:
            ids += [part.strip() for part in value.split(",") if part.strip()]
    return tuple(ids)


def _memory(text: str | None) -> int | None:
    return parse_memory(text) if text else None


def _image_map(rules: list[str] | None) -> ImageMap:
    """The flag's rules first, then ORSBOX_IMAGE_MAP's (also when the flag is not given)."""
    return ImageMap.from_env(rules or [])


class FormatOptions(BaseModel):
    """The options every format takes; extra fields are other formats' (`of` checks a
    format's own)."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True, extra="allow")

    name: str | None = Field(default=None, description="the environment's name")
    split: Annotated[str | None, Flag("--dataset-split")] = Field(
        default=None,
        description="split to put the tasks in (default: the file's name or the rows' split "
        "column; `test` for task folders)",
    )
    image_map: Annotated[ImageMap, Flag(typed=list[str] | None, read=_image_map)] = Field(
        default_factory=ImageMap,
        description="FROM=TO image rewrite, repeatable (FROM ending in / maps a prefix); also "
        "ORSBOX_IMAGE_MAP",
    )
    tools: Annotated[tuple[str, ...] | None, Flag(typed=str | None, read=read_names)] = Field(
        default=None,
        description=f"comma-separated standard tools (default: {','.join(DEFAULT_TOOLS)}; "
        "submit is always offered)",
    )
    call_timeout_s: Annotated[float | None, Flag("--call-timeout")] = Field(
        default=None, gt=0, description="default seconds per command"
    )
    episode_timeout_s: Annotated[float | None, Flag("--episode-timeout")] = Field(
        default=None, gt=0, description="seconds an episode may last after setup"
    )
    cpus: float | None = Field(default=None, gt=0, description="CPUs per sandbox")
    memory_bytes: Annotated[int | None, Flag("--memory", typed=str | None, read=_memory)] = Field(
        default=None, gt=0, description="memory per sandbox, e.g. 4g"
    )

    def of(self, model: type[Options]) -> Options:
        """These options as `model`, a format's own options: its fields checked, other
        formats' dropped. A bad value is a `ManifestError` naming the field."""
        if isinstance(self, model):
            return self
        values = dict(self)  # fields and extras
        try:
            return model.model_validate(
                {k: v for k, v in values.items() if k in model.model_fields}
            )
        except ValueError as e:
            raise ManifestError(f"dataset options: {e}") from None
