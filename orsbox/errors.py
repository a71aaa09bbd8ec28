"""Every error orsbox raises on purpose, in one tree.

    OrsboxError                      root; `status` is the HTTP status it maps to
    ├── BadRequest (400)             malformed input, unknown split, bad index ...
    ├── Unauthorized (401)
    ├── Forbidden (403)              outside the operator's policy; names the setting
    ├── NotFound (404)               unknown environment or session
    ├── Gone (410)                   session was deleted
    ├── PayloadTooLarge (413)
    ├── ServiceUnavailable (503)     setup still running, capacity reached
    ├── SetupFailed (500)            the session's setup raised; carries its message
    ├── ManifestError                an environment definition is invalid (load time)
    ├── PolicyViolation              an environment asks for more than the operator allows
    └── SandboxError (500)           the sandbox layer failed
        ├── ImageNotFound            the image is missing; says how to build it
        ├── ImageBuildError          building an image failed; carries the build's tail
        ├── SandboxStartError        the container could not start
        ├── SandboxGone              the sandbox died under the session (OOM, killed)
        └── SandboxFileError         read/write failed (missing path, folder, permission)

Foreign exceptions (docker, requests) are translated to these in exactly one place per
backend, so the server's error table (`orsbox.server.errors`) stays small.
"""

from __future__ import annotations


class OrsboxError(Exception):
    status: int = 500

    def __init__(self, message: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.headers = headers or {}

    def __str__(self) -> str:
        return self.message


class BadRequest(OrsboxError):
    status = 400


class Unauthorized(OrsboxError):
    status = 401


class Forbidden(OrsboxError):
    status = 403


class NotFound(OrsboxError):
    status = 404


class Gone(OrsboxError):
    status = 410


class PayloadTooLarge(OrsboxError):
    status = 413


class ServiceUnavailable(OrsboxError):
    status = 503


class SetupFailed(OrsboxError):
    status = 500


class ManifestError(OrsboxError):
    status = 500


class PolicyViolation(OrsboxError):
    status = 500


class SandboxError(OrsboxError):
    status = 500


class ImageNotFound(SandboxError):
    pass


class ImageBuildError(SandboxError):
    pass


class SandboxStartError(SandboxError):
    pass


class SandboxGone(SandboxError):
    """The sandbox is no longer there. Terminal for the session that owned it."""


class SandboxFileError(SandboxError):
    """A file operation failed in a way the agent should read (not a server fault)."""
