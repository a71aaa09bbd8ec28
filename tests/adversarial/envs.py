"""Container environments for the adversarial suite: small limits, so hostile commands
hit them fast, and a bounded disk."""

from __future__ import annotations

from orsbox.authoring import SingleTask
from orsbox.authoring.standard_tools import BashTool, FileTools, PythonTool
from orsbox.sandbox import SandboxLimits

MIB = 1024**2
SEEDED_IMAGE = "orsbox/test-seeded:latest"  # built by tests/adversarial/test_disk.py


class Hostile(SingleTask, BashTool, PythonTool, FileTools):
    """Every standard tool; 256 MiB of memory, 256 pids, 32 MiB per writable folder."""

    limits = SandboxLimits(memory_bytes=256 * MIB, pids=256, cpus=1.0, disk_bytes=32 * MIB)
    exec_timeout_s = 20.0
    prompt = "do your worst"


class Seeded(Hostile):
    """An image with content in /workspace: the bounded folder must still hold it."""

    image = SEEDED_IMAGE


class Roomy(Hostile):
    """Hostile with 512 MiB and 512 pids (tests/adversarial/test_gvisor_bombs.py's
    limits): room for a fork bomb under gVisor to end at RLIMIT_NPROC and leave the
    sandbox (with 256 MiB the bomb's own gVisor memory may end it first)."""

    limits = SandboxLimits(memory_bytes=512 * MIB, pids=512, cpus=1.0, disk_bytes=32 * MIB)
