"""The environment `bench/soak.py` serves: every standard tool, small limits (so
hostile commands hit them fast) and a bounded disk."""

from __future__ import annotations

from orsbox.authoring import SingleTask
from orsbox.authoring.standard_tools import BashTool, FileTools, PythonTool
from orsbox.sandbox import SandboxLimits

MIB = 1024**2


class Soak(SingleTask, BashTool, PythonTool, FileTools):
    limits = SandboxLimits(memory_bytes=256 * MIB, pids=256, cpus=1.0, disk_bytes=32 * MIB)
    exec_timeout_s = 10.0
    prompt = "soak"
