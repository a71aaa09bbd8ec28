"""`--grading-errors`, the operator's switch for a grader that could not run, derived
from `Settings.grading_errors` (its help is the field's description, its default the
setting's, so ORSBOX_GRADING_ERRORS and the flag never drift apart)."""

from __future__ import annotations

from typing import Annotated, get_args

import typer

from orsbox.settings import Settings

_FIELD = Settings.model_fields["grading_errors"]
CHOICES: tuple[str, ...] = get_args(_FIELD.annotation)

GradingErrors = Annotated[
    str | None,
    typer.Option(
        "--grading-errors",
        help=f"{_FIELD.description} (default: ORSBOX_GRADING_ERRORS, else {_FIELD.default})",
        show_default=False,
    ),
]


def with_grading_errors(settings: Settings, value: str | None) -> Settings:
    """`settings` with the flag laid over it; a value the setting does not know is
    refused naming the ones it does."""
    if value is None:
        return settings
    if value not in CHOICES:
        raise typer.BadParameter(f"one of {', '.join(CHOICES)}", param_hint="--grading-errors")
    return settings.model_copy(update={"grading_errors": value})
