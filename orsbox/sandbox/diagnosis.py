"""One answer of `orsbox doctor` about the machine a backend runs sandboxes on: what was
checked, whether it holds, what was seen, and how to fix it. Backends return these from
`SandboxBackend.engine_checks` (the Docker backend: `orsbox.sandbox.docker.diagnosis`),
so the CLI prints what it is told without knowing the engine."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EngineCheck:
    name: str
    ok: bool
    detail: str
    fix: str = ""
