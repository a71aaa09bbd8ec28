"""The operator's sandbox policy, checked when the server loads its environments.

What an environment may ask of its container is bounded twice: `SandboxLimits` cannot
even express privileged mode, host mounts, the Docker socket or host networking (its
fields are closed), and what it can express that widens the attack surface — a
network, added capabilities — must also be allowed by the server's settings. A refused
environment stops the server at load time with a message saying how to allow it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from orsbox.authoring import Environment
from orsbox.authoring.container import ContainerEnvironment
from orsbox.errors import PolicyViolation
from orsbox.settings import Settings


def check_policy(environments: Sequence[type[Environment]], settings: Settings) -> None:
    for env_cls in environments:
        if issubclass(env_cls, ContainerEnvironment):
            _check_one(env_cls, settings)


def _check_one(env_cls: type[ContainerEnvironment], settings: Settings) -> None:
    name = env_cls.name().lower()
    limits = env_cls.limits
    if limits.network and not settings.allow_network:
        raise PolicyViolation(
            f"environment {name!r} asks for a network; this server does not allow it "
            "(allow with ORSBOX_ALLOW_NETWORK=1)"
        )
    refused = sorted(set(limits.cap_add) - set(settings.allow_cap_add))
    if refused:
        raise PolicyViolation(
            f"environment {name!r} asks for capabilities {', '.join(refused)}; this server "
            f"does not allow them (allow with ORSBOX_ALLOW_CAP_ADD='{json.dumps(refused)}')"
        )
