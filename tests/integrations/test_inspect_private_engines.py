"""The Inspect provider with its sandboxes under gVisor and on Podman (docs/backends.md,
"Every environment on every backend"): Inspect's exec checks (its `self_check` suite,
whole on runc in test_inspect_self_check.py) and `exec(user="root")`, in-process with
`engine=` (and `runtime="runsc"` on gVisor's), and on the backend `ORSBOX_BACKEND`
configures. A module of its own: Inspect's `task_cleanup` releases every host of the
process, the other module's server too."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("inspect_ai", reason="pip install -e '.[inspect]'")

from inspect_ai.util._sandbox import self_check

from orsbox.integrations.inspect import OrsboxSandboxConfig
from orsbox.integrations.inspect.config import DEFAULT_IMAGE
from tests.integrations.test_inspect_self_check import provider
from tests.runtimes import ENGINES, PODMAN_ENGINE, runtime_available

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


EXEC_CHECKS = [
    "test_exec_output", "test_exec_stderr", "test_exec_returncode", "test_exec_env_vars",
    "test_exec_input_text", "test_exec_as_nonexistent_user", "test_cwd_relative",
    "test_exec_timeout",
]  # fmt: skip


@pytest.mark.parametrize("runtime", list(ENGINES))
async def test_exec_checks_on_each_private_engine(base_image: str, runtime: str) -> None:
    """Inspect's exec checks hold, and `exec(user="root")`, which its own check reaches
    only through `adduser` (test_inspect_self_check.py's HARDENED_ROOT), runs as root
    and makes a folder in `/`, as on runc."""
    runtime_available(runtime)
    config = OrsboxSandboxConfig(
        engine=ENGINES[runtime], runtime=runtime if runtime == "runsc" else None
    )
    async with provider(config) as environment:
        for name in EXEC_CHECKS:
            await getattr(self_check, name)(environment)
        made = await environment.exec(
            ["sh", "-c", "id -un; mkdir /made; stat -c %U /made"], user="root"
        )
        assert (made.returncode, made.stdout) == (0, "root\nroot\n"), made.stderr
        assert (await environment.exec(["id", "-un"])).stdout == "orsbox\n"


async def test_in_process_sandboxes_start_on_the_backend_orsbox_backend_configures(
    base_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the server does: ORSBOX_BACKEND's engine (Podman's: its init is PID 1) and its
    image map (an image this machine has no registry for, mapped to one it has)."""
    runtime_available("podman")
    backend = {"engine": PODMAN_ENGINE, "image_map": [f"ubuntu:24.04={DEFAULT_IMAGE}"]}
    monkeypatch.setenv("ORSBOX_BACKEND", json.dumps(backend))
    async with provider(OrsboxSandboxConfig(image="ubuntu:24.04")) as environment:
        init = await environment.exec(["sh", "-c", "tr '\\0' ' ' < /proc/1/cmdline"])
        assert init.returncode == 0 and "podman-init" in init.stdout, init
