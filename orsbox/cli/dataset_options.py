"""The options `serve`, `run`, `build` and `check` share for benchmark datasets, typed
once here and turned into one `FormatOptions` (see `orsbox.formats`)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Annotated, Any, TypeVar, get_type_hints

import typer

from orsbox.errors import ManifestError
from orsbox.formats.options import FormatOptions, parse_memory, read_instance_ids
from orsbox.sandbox.image_map import ImageMap, ImageMapError
from orsbox.settings import Settings

__all__ = ["FormatOptions", "format_options", "with_dataset_options"]

_PANEL = "Benchmark datasets (swebench:PATH, harbor:PATH, task folders)"

# parameter -> (type, default, flag, help), in the order --help lists them
_OPTIONS: dict[str, tuple[Any, Any, str, str]] = {
    "name": (str | None, None, "--name", "the environment's name"),
    "dataset_split": (
        str | None,
        None,
        "--dataset-split",
        "split to put the tasks in (default: the file's name or the rows' split column; "
        "`test` for task folders)",
    ),
    "image_map": (
        list[str] | None,
        None,
        "--image-map",
        "FROM=TO image rewrite, repeatable (FROM ending in / maps a prefix); also ORSBOX_IMAGE_MAP",
    ),
    "instances": (
        list[str] | None,
        None,
        "--instances",
        "only these instance ids: ids, comma-separated, or @FILE of ids (repeatable)",
    ),
    "image_template": (
        str | None,
        None,
        "--image-template",
        "instance image from row fields, e.g. 'me/sweb.{instance_id}:latest'",
    ),
    "tools": (
        str | None,
        None,
        "--tools",
        "comma-separated standard tools (default: bash,read_file,write_file,edit_file,"
        "list_dir; submit is always offered)",
    ),
    "hints": (bool, False, "--hints", "add the rows' hints_text to the prompt"),
    "test_cmd": (
        str | None,
        None,
        "--test-cmd",
        "test command for SWE-style rows that carry none (SWE-Gym and SWE-smith rows, "
        "v4 rows of a version SWE-bench 4's spec tables lack), e.g. 'pytest -rA'",
    ),
    "call_timeout": (float | None, None, "--call-timeout", "default seconds per command"),
    "episode_timeout": (
        float | None,
        None,
        "--episode-timeout",
        "seconds an episode may last after setup",
    ),
    "build_missing": (
        bool,
        False,
        "--build-missing",
        "build a Harbor task's missing docker_image from its environment/Dockerfile",
    ),
    "cpus": (float | None, None, "--cpus", "CPUs per sandbox"),
    "memory": (str | None, None, "--memory", "memory per sandbox, e.g. 4g"),
    "grading": (
        str | None,
        None,
        "--grading",
        f"official|strict: {Settings.model_fields['grading'].description} (also ORSBOX_GRADING)",
    ),
}


def format_options(
    *,
    name: str | None = None,
    split: str | None = None,
    image_map: list[str] | None = None,
    instances: list[str] | None = None,
    image_template: str | None = None,
    tools: str | None = None,
    hints: bool = False,
    test_cmd: str | None = None,
    call_timeout: float | None = None,
    episode_timeout: float | None = None,
    cpus: float | None = None,
    memory: str | None = None,
    build_missing: bool = False,
    grading: str | None = None,
) -> FormatOptions:
    """The options as one model; a bad value is a `typer.BadParameter` naming it."""
    try:
        images = ImageMap.from_env(image_map or [])
    except ImageMapError as e:
        raise typer.BadParameter(str(e), param_hint="--image-map") from None
    if grading is not None and grading not in ("official", "strict"):
        raise typer.BadParameter(
            f"{grading!r} is neither official nor strict", param_hint="--grading"
        )
    try:
        return FormatOptions(
            name=name,
            split=split,
            image_map=images,
            instances=read_instance_ids(instances or []),
            image_template=image_template,
            tools=tuple(t.strip() for t in tools.split(",") if t.strip()) if tools else None,
            hints=hints,
            test_cmd=test_cmd,
            call_timeout_s=call_timeout,
            episode_timeout_s=episode_timeout,
            cpus=cpus,
            memory_bytes=parse_memory(memory) if memory else None,
            build_missing=build_missing,
            grading=grading,  # type: ignore[arg-type]  # one of the Literal's two names, checked above
        )
    except ManifestError as e:
        raise typer.BadParameter(str(e)) from None


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
    extra = [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            default=default,
            annotation=Annotated[kind, typer.Option(flag, help=help, rich_help_panel=_PANEL)],
        )
        for name, (kind, default, flag, help) in _OPTIONS.items()
    ]

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        values = {name: kwargs.pop(name) for name in _OPTIONS if name in kwargs}
        values["split"] = values.pop("dataset_split", None)
        return command(*args, dataset=format_options(**values), **kwargs)

    del wrapper.__wrapped__  # typer must read the signature below, not the original's
    wrapper.__annotations__ = {p.name: p.annotation for p in [*own, *extra]}
    wrapper.__signature__ = signature.replace(parameters=[*own, *extra], return_annotation=None)  # type: ignore[attr-defined]  # typer reads it; mypy knows no such attribute on functions
    return wrapper  # type: ignore[return-value]  # F, with other options: typer reads the signature
