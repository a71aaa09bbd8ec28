"""The wheel ships the native sleeper prebuilt (orsbox/sandbox/guest/sleeper/): where the
build has `musl-gcc` (or ORSBOX_SLEEPER_CC), `build_py` compiles `sleeper.c` into the
package beside the digest of its source, which the server checks before using it.
Without a compiler the wheel has no sleeper and the server builds one itself, or its
guests sleep as bash. An editable install (`pip install -e .`) ships none: the server
builds it from the checkout's source. Everything else is in pyproject.toml."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SLEEPER = Path(__file__).resolve().parent / "orsbox" / "sandbox" / "guest" / "sleeper"


class BuildPyWithSleeper(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        # the module alone, by path: importing the orsbox package needs its dependencies
        spec = importlib.util.spec_from_file_location("orsbox_sleeper", SLEEPER / "__init__.py")
        assert spec is not None and spec.loader is not None
        sleeper = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sleeper)
        target = Path(self.build_lib) / "orsbox" / "sandbox" / "guest" / "sleeper"
        if sleeper.ship(target):
            print(f"the native sleeper: built into {target}")
        else:
            print(
                "the native sleeper: not built (no musl-gcc); the server builds it, or sleeps as bash"
            )


setup(cmdclass={"build_py": BuildPyWithSleeper})
