"""Load a trainer's own ORS code from a checkout of its repository, unmodified, to run
it against orsbox (docs/trainers.md says which commits were run so):

| variable | checkout of | files loaded |
|---|---|---|
| `ORSBOX_SKYRL_SOURCE` | github.com/NovaSky-AI/SkyRL | `examples/train_integrations/openreward/{env,prepare_tasks}.py` |
| `ORSBOX_ROLL_SOURCE` | github.com/alibaba/ROLL | `roll/pipeline/agentic/env/openreward/{openreward_env,tool_utils}.py`, `roll/utils/constants.py` |
| `ORSBOX_COOKBOOK_SOURCE` | github.com/OpenRewardAI/openreward-cookbook | `training/{slime,miles}/{config,generate,reward,prepare_tasks}.py` |

Nothing of theirs is in this repository. Only what a CPU machine cannot install is
stood in for: ROLL's packages' `__init__` files (they import torch and ray) are
skipped, and `gem` (ROLL's environment base class) is a bare base class when the
`gem-llm` package is not installed. The model is the test's scripted policy.
"""

from __future__ import annotations

import abc
import contextlib
import importlib.util
import os
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

VARIABLES = {
    "skyrl": "ORSBOX_SKYRL_SOURCE",
    "roll": "ORSBOX_ROLL_SOURCE",
    "cookbook": "ORSBOX_COOKBOOK_SOURCE",
}


def source(project: str) -> Path:
    """The checkout the variable names, or the test skips saying how to give one."""
    name = VARIABLES[project]
    value = os.environ.get(name)
    if not value:
        pytest.skip(f"{name} is unset: point it at a checkout of {project} (docs/trainers.md)")
    root = Path(value)
    if not root.is_dir():
        pytest.fail(f"{name}={value} is not a directory")
    return root


_PLACED: list[str] = []  # the names put in sys.modules by the load under way


def _place(name: str, module: types.ModuleType) -> types.ModuleType:
    _PLACED.append(name)
    sys.modules[name] = module
    return module


def _load(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = _place(name, importlib.util.module_from_spec(spec))
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def _modules() -> Iterator[None]:
    """The names the loaded files take in sys.modules (generic ones: `config`,
    `generate`, `roll`) as they were once the test is done; what they import stays."""
    before = {name: sys.modules.get(name) for name in ("config", "generate", "reward", "gem")}
    _PLACED.clear()
    try:
        yield
    finally:
        for name in {*_PLACED, *before}:
            sys.modules.pop(name, None)
        sys.modules.update({k: v for k, v in before.items() if v is not None})
        _PLACED.clear()


def _package(name: str) -> None:
    module = types.ModuleType(name)
    module.__path__ = []
    _place(name, module)


@contextlib.contextmanager
def skyrl() -> Iterator[tuple[types.ModuleType, types.ModuleType]]:
    """SkyRL's `env.py` (`OpenRewardEnv`) and `prepare_tasks.py`."""
    root = source("skyrl") / "examples" / "train_integrations" / "openreward"
    pytest.importorskip("loguru", reason="SkyRL's env.py imports loguru: pip install loguru")
    pytest.importorskip("skyrl_gym", reason="pip install skyrl-gym==0.4.0")
    with _modules():
        yield (
            _load("skyrl_openreward_env", root / "env.py"),
            _load("skyrl_prepare_tasks", root / "prepare_tasks.py"),
        )


class _GemEnv(abc.ABC):  # noqa: B024 - gem.core.Env's shape: step and reset, no __init__
    """What ROLL's class uses of `gem.Env` when gem-llm is not installed: its base
    `reset(seed)` (gem's seeds its random generators; nothing here draws from them)."""

    def reset(self, seed: int | None = None) -> None:
        return None


@contextlib.contextmanager
def roll() -> Iterator[types.ModuleType]:
    """ROLL's `openreward_env.py` (`OpenRewardEnv`), with its `tool_utils.py` and
    `roll/utils/constants.py` as they are."""
    root = source("roll")
    with _modules():
        try:
            import gem  # noqa: F401 - the real base class when installed
        except ImportError:
            _place("gem", types.ModuleType("gem")).Env = _GemEnv  # type: ignore[attr-defined] # stands in for gem-llm
        for name in ("roll", "roll.utils", "roll.pipeline", "roll.pipeline.agentic"):
            _package(name)
        _package("roll.pipeline.agentic.env")
        _package("roll.pipeline.agentic.env.openreward")
        _load("roll.utils.constants", root / "roll" / "utils" / "constants.py")
        here = root / "roll" / "pipeline" / "agentic" / "env" / "openreward"
        _load("roll.pipeline.agentic.env.openreward.tool_utils", here / "tool_utils.py")
        yield _load(
            "roll.pipeline.agentic.env.openreward.openreward_env", here / "openreward_env.py"
        )


@contextlib.contextmanager
def cookbook(trainer: str) -> Iterator[types.SimpleNamespace]:
    """The cookbook's `training/<trainer>/` (slime or miles): `config`, `generate`,
    `reward` and `prepare_tasks`, as `--custom-generate-function-path generate.generate`
    and `--custom-rm-path reward.reward_func` load them."""
    root = source("cookbook") / "training" / trainer
    with _modules():
        config = _load("config", root / "config.py")
        return_ = types.SimpleNamespace(
            config=config,
            generate=_load("generate", root / "generate.py"),
            reward=_load("reward", root / "reward.py"),
            prepare_tasks=_load("prepare_tasks", root / "prepare_tasks.py"),
        )
        yield return_
