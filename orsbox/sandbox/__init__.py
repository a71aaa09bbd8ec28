"""Sandboxes: where an agent's commands run. See `base` for the contract."""

from orsbox.sandbox.base import (
    EXEC_TIMEOUT_S,
    OUTPUT_CAP_BYTES,
    ExecResult,
    Sandbox,
    SandboxBackend,
    SandboxInfo,
    SandboxLimits,
    SandboxSpec,
)

__all__ = [
    "EXEC_TIMEOUT_S",
    "OUTPUT_CAP_BYTES",
    "ExecResult",
    "Sandbox",
    "SandboxBackend",
    "SandboxInfo",
    "SandboxLimits",
    "SandboxSpec",
]
