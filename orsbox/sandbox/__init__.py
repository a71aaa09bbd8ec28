"""Sandboxes: where an agent's commands run. See `base` for the contract."""

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


def create_backend(kind: str = "docker", **options: object) -> SandboxBackend:
    """The backend named `kind`, imported only when chosen (the docker SDK is heavy)."""
    if kind == "docker":
        from orsbox.sandbox.docker import DockerBackend

        return DockerBackend(**options)  # type: ignore[arg-type]
    raise ValueError(f"unknown sandbox backend {kind!r}; known: docker")


__all__ = [
    "EXEC_TIMEOUT_S",
    "OUTPUT_CAP_BYTES",
    "ExecResult",
    "HostMount",
    "Sandbox",
    "SandboxBackend",
    "SandboxInfo",
    "SandboxLimits",
    "SandboxSpec",
    "create_backend",
]
