"""MkDocs hook: the reference pages, generated from the code at every build.

`reference/cli.md` comes from the typer application (every command, argument and option
with its help), `reference/http.md` from the server's own OpenAPI schema (every route,
what it takes and every status it can answer), so neither can drift from what orsbox
does. The server is built with the in-process fake backend and the math environment
(nothing is started); the sandbox API is on so its routes are listed too.
"""

from __future__ import annotations

from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

ROUTE_ORDER = ("get", "post", "put", "delete")


def on_files(files: Files, config: MkDocsConfig) -> Files:
    files.append(File.generated(config, "reference/cli.md", content=cli_page()))
    files.append(File.generated(config, "reference/http.md", content=http_page()))
    return files


# -- the command line --------------------------------------------------------------------


def cli_page() -> str:
    from typer.main import get_command

    from orsbox.cli.main import app

    root = get_command(app)
    lines = ["# Command line reference", "", "Generated from `orsbox --help` at build time.", ""]
    for name, command in sorted(_commands(root, "orsbox")):
        lines += _command_section(name, command)
    return "\n".join(lines)


def _commands(group: Any, prefix: str) -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []
    for name, command in getattr(group, "commands", {}).items():
        if command.hidden:
            continue
        full = f"{prefix} {name}"
        if getattr(command, "commands", None):  # a group (typer vendors its own click)
            found += _commands(command, full)
        else:
            found.append((full, command))
    return found


def _command_section(name: str, command: Any) -> list[str]:
    lines = [f"## `{name}`", "", (command.help or "").strip(), ""]
    rows = [_param_row(p) for p in command.params if p.name != "help"]
    if rows:
        lines += ["| argument or option | help | default |", "|---|---|---|", *rows, ""]
    return lines


def _param_row(param: Any) -> str:
    names = ", ".join(f"`{o}`" for o in param.opts) if param.opts else f"`{param.name}`"
    text = getattr(param, "help", None) or ""
    default = param.default if param.default not in (None, (), [], False) else ""
    return f"| {names} | {_cell(text)} | {_cell(str(default))} |"


# -- HTTP ------------------------------------------------------------------------------


def http_page() -> str:
    schema = _schema()
    lines = [
        "# HTTP API reference",
        "",
        "Generated at build time from the server's OpenAPI schema (also served live at",
        '`/openapi.json` and `/docs`). Error answers are JSON `{"detail": ...}`.',
        "",
    ]
    for path, item in schema["paths"].items():
        for method in ROUTE_ORDER:
            if method in item:
                lines += _operation(method, path, item[method])
    return "\n".join(lines)


def _schema() -> dict[str, Any]:
    from orsbox.sandbox.config import create_backend
    from orsbox.sandbox.fake import FakeConfig
    from orsbox.server.app import create_app
    from orsbox.settings import Settings
    from orsbox.targets import resolve_target

    settings = Settings(sandbox_api=True, token="documentation-token-0123456789")
    environments = resolve_target("environments/math/environment.py")
    app = create_app(environments, settings, sandbox_backend=create_backend(FakeConfig()))
    return app.openapi()


def _operation(method: str, path: str, operation: dict[str, Any]) -> list[str]:
    lines = [f"## `{method.upper()} {path}`", ""]
    text = operation.get("description") or operation.get("summary") or ""
    if text:
        lines += [text.strip(), ""]
    parameters = [
        f"`{p['name']}` ({p['in']}{', required' if p.get('required') else ''})"
        for p in operation.get("parameters", [])
    ]
    if parameters:
        lines += ["Parameters: " + ", ".join(parameters) + ".", ""]
    body = operation.get("requestBody", {}).get("content", {})
    for media, content in body.items():
        ref = content.get("schema", {}).get("$ref", "").rsplit("/", 1)[-1]
        lines += [f"Body: `{media}`" + (f", schema `{ref}`." if ref else "."), ""]
    statuses = ", ".join(
        f"`{code}` {_cell(answer.get('description', ''))}"
        for code, answer in sorted(operation.get("responses", {}).items())
    )
    lines += [f"Answers: {statuses}.", ""]
    return lines


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")
