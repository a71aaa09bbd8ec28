"""The OpenAPI schema at `/openapi.json`, made to say what the server really answers.

FastAPI's generated schema promises things orsbox does not do and omits what it does:
it documents a 422 with its own error shape, while `orsbox.server.errors` answers every
validation error with 400 and `{"detail": str}`; it knows nothing of the statuses our
errors carry (404, 410, 413, 503 ...), of SSE bodies, or that `X-Session-ID` is
required. Routes declare their error statuses with `errors(...)` and their SSE answers
with `SSE`; `install_openapi` fixes the rest once, when the schema is first built. The
schemathesis run in `tests/adversarial/test_schema_fuzz.py` holds the two to each other.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel, Field


class ErrorBody(BaseModel):
    """Every error outside an SSE stream."""

    detail: str
    infra: bool | None = Field(
        default=None,
        description="true when the failure is not the client's or the model's (a setup "
        "that failed, the sandbox layer, a server fault); absent otherwise",
    )


MEANINGS = {
    400: "bad input: malformed JSON, wrong types, unknown split, index out of range, "
    "missing X-Session-ID, a session id that already exists",
    401: "missing or wrong API token",
    403: "outside the operator's sandbox policy (the message names the setting)",
    404: "unknown environment or session (also once reaped)",
    410: "the session was deleted",
    421: "the session belongs to another cell of a cluster (the message names it)",
    413: "request body too large",
    416: "an offset past the end of the file",
    500: "the session's setup failed (its message), or a server fault",
    503: "setup still running, or the server is at capacity; see Retry-After",
}

SSE_EVENT = {  # OpenAPI 3.1: an event stream's `schema` describes one event
    "type": "object",
    "required": ["event", "data"],
    "properties": {
        "event": {"enum": ["task_id", "chunk", "end", "error"]},
        "data": {"type": "string"},
    },
}
SSE: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Server-Sent Events: `task_id`, then `chunk`s and `end`, or `error`",
        "content": {"text/event-stream": {"schema": SSE_EVENT}},
    }
}

SECURITY_SCHEMES = {  # either one, when the server has a token (ORSBOX_TOKEN)
    "bearer": {"type": "http", "scheme": "bearer"},
    "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
}


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """`responses=` for a route that can answer these error statuses."""
    return {s: _error_response(s) for s in statuses}


def install_openapi(app: FastAPI, env_names: list[str], token_required: bool) -> None:
    """Patch the generated schema once: no 422, a required `X-Session-ID`, the served
    environment names as the `env_name` values, and 401 and the token's security
    schemes wherever a token is needed."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = generate()  # kept as `app.openapi_schema`, so fixed once
        for path, item in schema["paths"].items():
            for operation in item.values():
                _fix_operation(operation, env_names, token_required and path != "/health")
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components.pop("HTTPValidationError", None)
        components.pop("ValidationError", None)
        components.setdefault("ErrorBody", ErrorBody.model_json_schema())
        if token_required:
            schema["components"]["securitySchemes"] = SECURITY_SCHEMES
        return schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented hook for a custom schema


def _fix_operation(operation: dict[str, Any], env_names: list[str], needs_token: bool) -> None:
    responses = operation.setdefault("responses", {})
    responses.pop("422", None)
    if needs_token:
        responses["401"] = _error_response(401)
        operation["security"] = [{name: []} for name in SECURITY_SCHEMES]
    for parameter in operation.get("parameters", []):
        if parameter["in"] == "header" and parameter["name"] == "x-session-id":
            parameter["required"] = True
            parameter["schema"] = {"type": "string", "pattern": r"\S", "title": "X-Session-Id"}
            responses["421"] = _error_response(421)  # an id of another cell (cells.py)
        elif parameter["in"] == "path" and parameter["name"] == "env_name":
            parameter["schema"] = {"type": "string", "enum": list(env_names)}


def _error_response(status: int) -> dict[str, Any]:
    # spelt out, not `"model": ErrorBody`: FastAPI would give an SSE route's errors
    # the route's text/event-stream type, and they are JSON
    return {
        "description": MEANINGS[status],
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
    }
