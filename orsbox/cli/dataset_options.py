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

__all__ = ["FormatOptions", "format_options", "with_dataset_options"]
from orsbox.sandbox.image_map import ImageMap, ImageMapError

_PANEL = "Benchmark datasets (swebench:PATH, harbor:PATH, task folders)"

Name = Annotated[
    str | None,
    typer.Option("--name", help="the environment's name", rich_help_panel=_PANEL),
]
DatasetSplit = Annotated[
    str | None,
    typer.Option(
        "--dataset-split",
        help="split to put the tasks in (default: the file's name or the rows' split "
        "column; `test` for task folders)",
        rich_help_panel=_PANEL,
    ),
]
ImageMapRules = Annotated[
    list[str] | None,
    typer.Option(
        "--image-map",
        help="FROM=TO image rewrite, repeatable (FROM ending in / maps a prefix); "
        "also ORSBOX_IMAGE_MAP",
        rich_help_panel=_PANEL,
    ),
]
Instances = Annotated[
    list[str] | None,
    typer.Option(
        "--instances",
        help="only these instance ids: ids, comma-separated, or @FILE of ids (repeatable)",
        rich_help_panel=_PANEL,
    ),
]
ImageTemplate = Annotated[
    str | None,
    typer.Option(
        "--image-template",
        help="instance image from row fields, e.g. 'me/sweb.{instance_id}:latest'",
        rich_help_panel=_PANEL,
    ),
]
Tools = Annotated[
    str | None,
    typer.Option(
        "--tools",
        help="comma-separated standard tools (default: bash,read_file,write_file,"
        "edit_file,list_dir; submit is always offered)",
        rich_help_panel=_PANEL,
    ),
]
Hints = Annotated[
    bool,
    typer.Option("--hints", help="add the rows' hints_text to the prompt", rich_help_panel=_PANEL),
]
TestCmd = Annotated[
    str | None,
    typer.Option(
        "--test-cmd",
        help="test command for SWE-style rows that carry none (v4 and SWE-Gym rows of "
        "repositories swebench 5 has no spec for, SWE-smith rows), e.g. 'pytest -rA'",
        rich_help_panel=_PANEL,
    ),
]
CallTimeout = Annotated[
    float | None,
    typer.Option("--call-timeout", help="default seconds per command", rich_help_panel=_PANEL),
]
EpisodeTimeout = Annotated[
    float | None,
    typer.Option(
        "--episode-timeout",
        help="seconds an episode may last after setup",
        rich_help_panel=_PANEL,
    ),
]
Cpus = Annotated[
    float | None, typer.Option("--cpus", help="CPUs per sandbox", rich_help_panel=_PANEL)
]
Memory = Annotated[
    str | None,
    typer.Option("--memory", help="memory per sandbox, e.g. 4g", rich_help_panel=_PANEL),
]


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
) -> FormatOptions:
    """The options as one model; a bad value is a `typer.BadParameter` naming it."""
    try:
        images = ImageMap.from_env(image_map or [])
    except ImageMapError as e:
        raise typer.BadParameter(str(e), param_hint="--image-map") from None
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
        )
    except ManifestError as e:
        raise typer.BadParameter(str(e)) from None


F = TypeVar("F", bound=Callable[..., Any])

# parameter name -> (annotation, default), in the order --help lists them
_PARAMETERS: dict[str, tuple[Any, Any]] = {
    "name": (Name, None),
    "dataset_split": (DatasetSplit, None),
    "image_map": (ImageMapRules, None),
    "instances": (Instances, None),
    "image_template": (ImageTemplate, None),
    "tools": (Tools, None),
    "hints": (Hints, False),
    "test_cmd": (TestCmd, None),
    "call_timeout": (CallTimeout, None),
    "episode_timeout": (EpisodeTimeout, None),
    "cpus": (Cpus, None),
    "memory": (Memory, None),
}


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
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=kind)
        for name, (kind, default) in _PARAMETERS.items()
    ]

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        values = {name: kwargs.pop(name) for name in _PARAMETERS if name in kwargs}
        values["split"] = values.pop("dataset_split", None)
        return command(*args, dataset=format_options(**values), **kwargs)

    del wrapper.__wrapped__  # typer must read the signature below, not the original's
    wrapper.__annotations__ = {p.name: p.annotation for p in [*own, *extra]}
    wrapper.__signature__ = signature.replace(parameters=[*own, *extra], return_annotation=None)  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]
