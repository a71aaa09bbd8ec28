"""The one table from exceptions to HTTP answers. Every error body is `{"detail": str}`,
with `"infra": true` beside it when the failure is not the client's or the model's (a
setup that failed, the sandbox layer, a server fault): the `[infra]` marker of
docs/infra-failures.md, for answers outside an SSE stream.

* An `OrsboxError` answers with the status `STATUS_OF` gives its class (and the
  headers it carries, e.g. `Retry-After`); the domain errors know nothing of HTTP.
* Request validation (malformed JSON, wrong types, missing fields) is 400, as the
  spec's status list says, with a message naming each field and problem.
* Anything else is a server fault: 500 with the exception type, secrets redacted.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from orsbox.authoring.tools import is_infra_error
from orsbox.errors import (
    BadRequest,
    Forbidden,
    Gone,
    ManifestError,
    Misdirected,
    NotFound,
    OrsboxError,
    PayloadTooLarge,
    PolicyViolation,
    RangeNotSatisfiable,
    SandboxError,
    ServiceUnavailable,
    SetupFailed,
    Unauthorized,
)
from orsbox.server.secrets import LIVE_SECRETS

log = logging.getLogger("orsbox.server")

# Most specific first: the first class the error is an instance of gives its status.
# An OrsboxError no row names (a manifest, policy or sandbox fault) is the server's: 500.
STATUS_OF: tuple[tuple[type[OrsboxError], int], ...] = (
    (BadRequest, 400),
    (Unauthorized, 401),
    (Forbidden, 403),
    (NotFound, 404),
    (Gone, 410),
    (Misdirected, 421),
    (PayloadTooLarge, 413),
    (RangeNotSatisfiable, 416),
    (ServiceUnavailable, 503),
    (SetupFailed, 500),
    (ManifestError, 500),
    (PolicyViolation, 500),
    (SandboxError, 500),
    (OrsboxError, 500),
)


def status_of(error: OrsboxError) -> int:
    """The HTTP status `error` answers with: its class's row in `STATUS_OF`."""
    return next(status for cls, status in STATUS_OF if isinstance(error, cls))


def _error(
    status: int, detail: str, headers: dict[str, str] | None = None, *, infra: bool = False
) -> JSONResponse:
    body: dict[str, object] = {"detail": LIVE_SECRETS.redact(detail)}
    if infra:
        body["infra"] = True
    return JSONResponse(body, status_code=status, headers=headers)


def is_infra(error: OrsboxError) -> bool:
    """Whether an error answered over HTTP is the host's: a session's setup that failed
    (before the model did anything), or the sandbox layer (not a file the agent named)."""
    return isinstance(error, SetupFailed) or is_infra_error(error)


def describe_validation_error(error: RequestValidationError) -> str:
    problems = []
    for item in error.errors():
        if item.get("type") == "json_invalid":
            problems.append(f"malformed JSON: {item.get('ctx', {}).get('error', item['msg'])}")
            continue
        where = ".".join(str(p) for p in item.get("loc", ()) if p != "body") or "body"
        problems.append(f"{where}: {item['msg']}")
    return "invalid request: " + "; ".join(problems)


async def _orsbox_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, OrsboxError)
    return _error(status_of(exc), exc.message, exc.headers or None, infra=is_infra(exc))


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return _error(400, describe_validation_error(exc))


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    return _error(exc.status_code, str(exc.detail), getattr(exc, "headers", None))


async def _server_fault(request: Request, exc: Exception) -> JSONResponse:
    log.error("internal error on %s %s", request.method, request.url.path, exc_info=exc)
    return _error(500, f"internal server error: {type(exc).__name__}: {exc}", infra=True)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(OrsboxError, _orsbox_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _server_fault)
