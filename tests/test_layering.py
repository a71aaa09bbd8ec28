"""Imports run one way: `protocol` and `sandbox` are leaves, `authoring` sees only the
`Sandbox` interface. Walking every module's imports with `ast` keeps it that way; an
import inside a function counts as much as one at the top."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parent.parent / "orsbox"

# layer -> imported modules it must never reach (a prefix also forbids its submodules)
FORBIDDEN = {
    "orsbox.protocol": ("docker", "orsbox.server", "fastapi", "starlette"),
    "orsbox.sandbox": ("fastapi", "starlette", "orsbox.server"),
    "orsbox.authoring": ("docker", "orsbox.sandbox.docker"),
}


def module_name(path: Path, root: Path = PACKAGE_ROOT) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def resolve(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    """The absolute name a (possibly relative) `from ... import` refers to."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, module) for every import in the file, `from x import y` giving x and x.y."""
    module, is_package = module_name(path, root), path.name == "__init__.py"
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = resolve(module, node, is_package)
            found.append((node.lineno, source))
            found += [(node.lineno, f"{source}.{alias.name}") for alias in node.names]
    return found


def reaches(imported: str, forbidden: str) -> bool:
    return imported == forbidden or imported.startswith(forbidden + ".")


def violations(root: Path, layer: str, banned: tuple[str, ...]) -> list[str]:
    """'module (line n) imports name' for each import under `layer` that reaches `banned`."""
    found = []
    for path in sorted(root.joinpath(*layer.split(".")[1:]).rglob("*.py")):
        for line, imported in imports_of(path, root):
            if any(reaches(imported, forbidden) for forbidden in banned):
                found.append(f"{module_name(path, root)} (line {line}) imports {imported}")
    return sorted(set(found))


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_keeps_its_imports(layer: str) -> None:
    assert PACKAGE_ROOT.joinpath(*layer.split(".")[1:]).is_dir()
    found = violations(PACKAGE_ROOT, layer, FORBIDDEN[layer])
    assert not found, f"{layer} must not import {FORBIDDEN[layer]}:\n" + "\n".join(found)


def test_walker_names_function_level_relative_and_plain_imports(tmp_path: Path) -> None:
    layer = tmp_path / "orsbox" / "sandbox"
    layer.mkdir(parents=True)
    (layer / "__init__.py").write_text("from . import sub\n")
    (layer / "sub.py").write_text(
        "import dockerfile\ndef f():\n    from ..server import app\n    import docker.errors\n"
    )
    found = violations(tmp_path / "orsbox", "orsbox.sandbox", ("docker", "orsbox.server"))
    assert found == [
        "orsbox.sandbox.sub (line 3) imports orsbox.server",
        "orsbox.sandbox.sub (line 3) imports orsbox.server.app",
        "orsbox.sandbox.sub (line 4) imports docker.errors",
    ]
