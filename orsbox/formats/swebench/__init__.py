"""SWE-bench-schema datasets served as ORS environments, unmodified, graded exactly as
the official harness grades them: `orsbox serve swebench:PATH`.

    rows.py         reading .jsonl/.json/.parquet/datasets folders; field checks
    families.py     SWE-bench v4/v5, SWE-Gym, SWE-smith, SWE-rebench V2, R2E-Gym
    images.py       instance image names, the image map, pulling a missing image
    harness.py      the swebench package's parsers and resolution rule (lazy import)
    grading.py      submit: kill, diff, fresh container, apply, eval script, verdict
    protected.py    which changed files decide how the tests run (tests, conftest, config)
    strict.py       the strict verdict beside the official one (the patch without those)
    r2e.py          R2E-Gym's exact-match verdict
    environment.py  the Environment class one dataset becomes
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field

from orsbox.authoring.environment import Environment
from orsbox.errors import ManifestError
from orsbox.formats import Format
from orsbox.formats.options import Flag, FormatOptions, read_instance_ids


def _grading(value: str | None) -> str | None:
    if value is not None and value not in ("official", "strict"):
        raise ValueError(f"{value!r} is neither official nor strict")
    return value


class SWEBenchOptions(FormatOptions):
    """What only SWE-style datasets take."""

    instances: Annotated[
        tuple[str, ...] | None, Flag(typed=list[str] | None, read=read_instance_ids)
    ] = Field(
        default=None,
        description="only these instance ids: ids, comma-separated, or @FILE of ids (repeatable)",
    )
    image_template: str | None = Field(
        default=None,
        description="instance image from row fields, e.g. 'me/sweb.{instance_id}:latest'",
    )
    hints: bool = Field(default=False, description="add the rows' hints_text to the prompt")
    test_cmd: str | None = Field(
        default=None,
        description="test command for SWE-style rows that carry none (SWE-Gym and SWE-smith "
        "rows, v4 rows of a version SWE-bench 4's spec tables lack), e.g. 'pytest -rA'",
    )
    grading: Annotated[
        Literal["official", "strict"] | None, Flag(typed=str | None, read=_grading)
    ] = Field(
        default=None,
        description="official|strict: which verdict of a SWE-bench-family task is the reward: "
        "official (the harness's) or strict (the patch without its changes to tests, "
        "conftest.py, test configuration and start-up hooks); metadata carries both "
        "(default: ORSBOX_GRADING, else official)",
    )


def load(path: Path, given: FormatOptions) -> list[type[Environment]]:
    """One environment serving the dataset at `path`; every row is checked here, so a
    bad row stops `orsbox serve` at load with the file, the row and the problem."""
    from orsbox.formats.swebench import harness
    from orsbox.formats.swebench.environment import dataset_environment
    from orsbox.formats.swebench.families import Instance, read_instance
    from orsbox.formats.swebench.rows import read_rows

    options = given.of(SWEBenchOptions)
    harness.require()
    rows = read_rows(path, options.split)
    if options.instances is not None:
        wanted = set(options.instances)
        rows = [r for r in rows if _row_id(r.data) in wanted]
        missing = wanted - {_row_id(r.data) for r in rows}
        if missing:
            raise ManifestError(f"{path}: no row has instance id {', '.join(sorted(missing))}")
    if not rows:
        raise ManifestError(f"{path}: the dataset has no rows")
    instances: list[Instance] = []
    splits: dict[str, list[str]] = {}
    seen: set[str] = set()
    for row in rows:
        instance = read_instance(row, options)
        if instance.instance_id in seen:
            raise row.error(f"instance id {instance.instance_id!r} appears twice")
        seen.add(instance.instance_id)
        instances.append(instance)
        splits.setdefault(row.split, []).append(instance.instance_id)
    name = options.name or (path.stem if path.is_file() else path.name)
    return [dataset_environment(name, instances, splits, options)]


def _row_id(data: dict[str, object]) -> object:
    return data.get("instance_id") or data.get("docker_image")


FORMAT = Format(
    prefix="swebench",
    load=load,
    options=SWEBenchOptions,
    help="swebench:PATH (SWE-bench rows)",
)
