"""One answer of `orsbox doctor` about the machine a backend runs sandboxes on: what was
checked, whether it holds, what was seen, and how to fix it. Backends return these from
`SandboxBackend.engine_checks` (the Docker backend: `orsbox.sandbox.docker.diagnosis`),
so the CLI prints what it is told without knowing the engine.

A check can hold with a `warning`: nothing is wrong yet, but a known hazard applies (an
engine release with a bug orsbox's load can meet). It is printed with its fix and does
not fail doctor: Debian 12's own Docker has such a bug, and is still the engine most
machines here start with."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EngineCheck:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    warning: bool = False
