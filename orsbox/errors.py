"""Every error orsbox raises on purpose, in one tree.

    OrsboxError                      root; `headers` go out with the answer (Retry-After)
    ├── BadRequest                   malformed input, unknown split, bad index ...
    ├── Unauthorized
    ├── Forbidden                    outside the operator's policy; names the setting
    ├── NotFound                     unknown environment or session
    ├── Gone                         session was deleted
    ├── Misdirected                  the session belongs to another cell of a cluster
    ├── PayloadTooLarge
    ├── RangeNotSatisfiable          a read past the end of a file
    ├── ServiceUnavailable           setup still running, capacity reached
    ├── SetupFailed                  the session's setup raised; carries its message
    ├── ManifestError                an environment definition is invalid (load time)
    ├── PolicyViolation              an environment asks for more than the operator allows
    ├── GradingError                 the grader could not run (not a reward of 0); says why
    └── SandboxError                 the sandbox layer failed
        ├── ImageNotFound            the image is missing; says how to build it
        ├── ImageBuildError          building an image failed; carries the build's tail
        ├── SandboxStartError        the container could not start
        ├── SandboxGone              the sandbox died under the session (OOM, killed)
        └── SandboxFileError         read/write failed (missing path, folder, permission)

These are domain errors: none knows its HTTP status. The server's one table
(`orsbox.server.errors.STATUS_OF`) maps each class to its answer, so a CLI or a library
caller raises and catches them without HTTP leaking in. Foreign exceptions (docker,
requests) are translated to these in exactly one place per backend, so that table
stays small.
"""

from __future__ import annotations

import re

GRADING_ERROR_PREFIX = "grading error"
_GRADING_WIRE = re.compile(
    rf"^{GRADING_ERROR_PREFIX} \[(?P<cause>[a-z0-9-]+)\]: (?P<message>.*)$", re.S
)


class OrsboxError(Exception):
    def __init__(self, message: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.headers = headers or {}

    def __str__(self) -> str:
        return self.message


class BadRequest(OrsboxError):
    pass


class Unauthorized(OrsboxError):
    pass


class Forbidden(OrsboxError):
    pass


class NotFound(OrsboxError):
    pass


class Gone(OrsboxError):
    pass


class Misdirected(OrsboxError):
    pass


class PayloadTooLarge(OrsboxError):
    pass


class RangeNotSatisfiable(OrsboxError):
    pass


class ServiceUnavailable(OrsboxError):
    pass


class SetupFailed(OrsboxError):
    pass


class ManifestError(OrsboxError):
    pass


class PolicyViolation(OrsboxError):
    pass


class GradingError(OrsboxError):
    """Grading could not run, so there is no reward: a verifier that timed out or wrote
    no reward, an eval log without its test markers, a runner that never installed.
    Distinct from a reward of 0.0 (the agent failed the task) so that evaluations leave
    it out of their means and RL training gets no gradient from it. `cause` is a short
    machine-readable name of the rule that fired (e.g. "no-reward-file"); the message
    says the same for a person."""

    def __init__(self, message: str, *, cause: str) -> None:
        super().__init__(message)
        self.cause = cause

    def wire(self) -> str:
        """How it travels as the text of an ORS `error` event: every client shows the
        text, and orsbox's own (`orsbox eval`) reads the cause back with `from_wire`."""
        return f"{GRADING_ERROR_PREFIX} [{self.cause}]: {self.message}"

    @classmethod
    def from_wire(cls, text: str) -> GradingError | None:
        """The grading error an `error` event's text carries; None for any other error."""
        found = _GRADING_WIRE.match(text)
        return None if found is None else cls(found["message"], cause=found["cause"])


class SandboxError(OrsboxError):
    pass


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
