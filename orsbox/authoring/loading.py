"""Finding environment classes from what a user types: `module:Class`, `path/to/file.py:Class`,
a module or file alone (every `Environment` subclass defined in it), or a folder holding
an `orsbox.toml` manifest (or the manifest file itself). Environments written with the
`openreward` package are found the same way and served through `openreward_env.adapt`."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from pathlib import Path
from types import ModuleType

from orsbox.authoring.declarative import manifest_environment, manifest_path
from orsbox.authoring.environment import Environment
from orsbox.authoring.openreward_env import adapt, is_openreward_environment
from orsbox.errors import ManifestError


def _import(target: str) -> ModuleType:
    if target.endswith(".py") or "/" in target:
        path = Path(target).resolve()
        if not path.is_file():
            raise ManifestError(f"no such file: {target}")
        name = f"orsbox_user_{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        sys.path.insert(0, str(path.parent))
        spec.loader.exec_module(module)
        return module
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as e:
        raise ManifestError(f"cannot import {target!r}: {e}") from e


def _defined_in(module: ModuleType) -> list[type[Environment]]:
    return [
        _servable(obj)
        for obj in vars(module).values()
        if inspect.isclass(obj)
        and obj.__module__ == module.__name__
        and (_is_orsbox_environment(obj) or is_openreward_environment(obj))
    ]


def _is_orsbox_environment(obj: type) -> bool:
    return issubclass(obj, Environment) and not inspect.isabstract(obj)


def _servable(cls: type) -> type[Environment]:
    return adapt(cls) if is_openreward_environment(cls) else cls


def load_environment(ref: str) -> list[type[Environment]]:
    """The environment class(es) named by one reference."""
    if is_manifest(ref):
        return [manifest_environment(Path(ref))]
    target, _, attr = ref.partition(":")
    module = _import(target)
    if not attr:
        found = _defined_in(module)
        if not found:
            raise ManifestError(f"{target!r} defines no Environment subclass")
        return found
    cls = getattr(module, attr, None)
    if is_openreward_environment(cls):
        return [adapt(cls)]
    if not (inspect.isclass(cls) and issubclass(cls, Environment)):
        raise ManifestError(f"{ref!r} is not an orsbox (or openreward) Environment subclass")
    return [cls]


def is_manifest(ref: str) -> bool:
    """True for a folder with an `orsbox.toml`, or a `.toml` file."""
    path = Path(ref)
    return path.suffix == ".toml" or (path.is_dir() and manifest_path(path).is_file())


def load_environments(refs: list[str]) -> list[type[Environment]]:
    return [cls for ref in refs for cls in load_environment(ref)]
