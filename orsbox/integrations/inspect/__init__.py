"""orsbox as a sandbox provider for Inspect (`pip install -e '.[inspect]'`).

Inspect finds it through the `inspect_ai` entry point (pyproject), which imports
`orsbox.integrations.inspect.provider`; a task then asks for `sandbox="orsbox"`, or
`("orsbox", "compose.yaml")`, or `("orsbox", OrsboxSandboxConfig(url=..., runtime=...))`.
"""

from orsbox.integrations.inspect.config import OrsboxSandboxConfig

__all__ = ["OrsboxSandboxConfig"]
