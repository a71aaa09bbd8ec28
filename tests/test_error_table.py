"""HTTP statuses live in one table in the server; the domain errors carry none."""

from __future__ import annotations

import inspect

import pytest

from orsbox import errors
from orsbox.server.errors import STATUS_OF, status_of

DOMAIN_ERRORS = [
    cls
    for cls in vars(errors).values()
    if inspect.isclass(cls) and issubclass(cls, errors.OrsboxError)
]

# the answers each error gave before the table moved into the server
EXPECTED = {
    errors.BadRequest: 400,
    errors.Unauthorized: 401,
    errors.Forbidden: 403,
    errors.NotFound: 404,
    errors.Gone: 410,
    errors.Misdirected: 421,
    errors.PayloadTooLarge: 413,
    errors.RangeNotSatisfiable: 416,
    errors.ServiceUnavailable: 503,
    errors.SetupFailed: 500,
    errors.ManifestError: 500,
    errors.PolicyViolation: 500,
    errors.GradingError: 500,  # outside a tool call (which answers an `error` event)
    errors.SandboxError: 500,
    errors.ImageNotFound: 500,
    errors.ImageBuildError: 500,
    errors.SandboxStartError: 500,
    errors.SandboxGone: 500,
    errors.SandboxFileError: 500,
    errors.OrsboxError: 500,
}


@pytest.mark.parametrize("cls", DOMAIN_ERRORS, ids=lambda cls: cls.__name__)
def test_each_domain_error_answers_its_status_and_knows_no_http(cls: type) -> None:
    error = cls("x", cause="c") if cls is errors.GradingError else cls("x")
    assert status_of(error) == EXPECTED[cls]
    assert not hasattr(error, "status")


def test_no_row_is_shadowed_by_an_earlier_superclass() -> None:
    for at, (cls, _) in enumerate(STATUS_OF):
        earlier = [before for before, _ in STATUS_OF[:at] if issubclass(cls, before)]
        assert not earlier, f"{cls.__name__} comes after its superclass {earlier[0].__name__}"


def test_an_error_outside_the_tree_of_names_falls_back_to_its_nearest_row() -> None:
    class Unlisted(errors.NotFound):
        pass

    assert status_of(Unlisted("x")) == 404
