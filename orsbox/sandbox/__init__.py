"""Sandboxes: where an agent's commands run. See `base` for the contract."""

from orsbox.sandbox.backend_config import BackendConfig
from orsbox.sandbox.base import (
    EXEC_TIMEOUT_S,
    OUTPUT_CAP_BYTES,
    ExecResult,
    HostMount,
    Sandbox,
    SandboxBackend,
    SandboxInfo,
    SandboxLimits,
    SandboxSpec,
)
from orsbox.sandbox.config import create_backend
from orsbox.sandbox.images import ImageRecipe, ImageStore

__all__ = [
    "EXEC_TIMEOUT_S",
    "OUTPUT_CAP_BYTES",
    "BackendConfig",
    "ExecResult",
    "HostMount",
    "ImageRecipe",
    "ImageStore",
    "Sandbox",
    "SandboxBackend",
    "SandboxInfo",
    "SandboxLimits",
    "SandboxSpec",
    "create_backend",
]
