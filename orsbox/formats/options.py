"""What a user may say about a benchmark dataset on the command line, one model for
`serve`, `run`, `build` and `check` (each format uses the fields that apply to it)."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from orsbox.errors import ManifestError
from orsbox.sandbox.image_map import ImageMap

_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def parse_memory(text: str) -> int:
    """`4g`, `512m`, `2GiB`, `1073741824` -> bytes; a `ManifestError` otherwise."""
    match = _MEMORY.match(text)
    if not match:
        raise ManifestError(f"memory {text!r} is not a size like 4g, 512m or 2GiB")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


class FormatOptions(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    name: str | None = Field(default=None, description="the environment's name")
    split: str | None = Field(default=None, description="the split its tasks are in")
    image_map: ImageMap = Field(default_factory=ImageMap)
    instances: tuple[str, ...] | None = Field(
        default=None, description="only these instance ids (SWE-style datasets)"
    )
    image_template: str | None = Field(
        default=None, description="image name from the row, e.g. 'me/{instance_id}:v1'"
    )
    tools: tuple[str, ...] | None = Field(default=None, description="standard tools offered")
    hints: bool = Field(default=False, description="add the row's hints to the prompt")
    test_cmd: str | None = Field(
        default=None, description="test command for SWE-style rows that carry none"
    )
    call_timeout_s: float | None = Field(default=None, gt=0)
    episode_timeout_s: float | None = Field(default=None, gt=0)
    cpus: float | None = Field(default=None, gt=0)
    memory_bytes: int | None = Field(default=None, gt=0)
    build_missing: bool = Field(
        default=False,
        description="build a Harbor task's docker_image from its environment/Dockerfile "
        "when the engine does not have it",
    )


def read_instance_ids(values: list[str]) -> tuple[str, ...] | None:
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
