"""Imports run one way, by an allow-list: each layer of the package names the layers it
may import, and anything else fails, so a new reach upwards is caught the day it is
written. Walking every module's imports with `ast` keeps it that way; an import inside
a function counts as much as one at the top.

The layers, bottom up: `protocol` (the wire) and `errors` (the shared vocabulary) import
nothing; `sandbox` sees `protocol`; `authoring` sees the sandbox contract; `formats` are
loaders producing environments; the `server` sees everything below; the `cli` sees all.
Inside `sandbox`, the Docker backend is confined: only the factory (`sandbox/config.py`)
and its own package import `orsbox.sandbox.docker`; the modules that still reach in are
listed by name in `DOCKER_REACHES` until issue 24's item 1 removes them.

Only the factory tells backends apart (`KIND_DECIDERS`): elsewhere code asks the
backend what it can do (`SandboxBackend.capabilities`) rather than compare its kind.

The tests at the bottom are the test of this test: every forbidden import, added to a
temporary copy of the package, makes it fail; so does a new comparison of kinds."""

from __future__ import annotations

import ast
import functools
import itertools
import shutil
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parent.parent / "orsbox"
ROOT = "orsbox"  # the package's own __init__: the public API (`orsbox.Environment`, ...)

# layer -> the other layers it may import (its own submodules always)
ALLOWED: dict[str, frozenset[str]] = {
    name: frozenset(f"orsbox.{layer}" if layer != ROOT else ROOT for layer in layers)
    for name, layers in {
        "orsbox.errors": (),
        "orsbox.protocol": (),
        "orsbox.sandbox": ("protocol", "errors"),
        "orsbox.authoring": ("protocol", "sandbox", "errors"),
        "orsbox.formats": ("authoring", "sandbox", "protocol", "errors"),
        # episodes record what graders report (authoring's reward-hacking findings)
        "orsbox.monitoring": ("protocol", "sandbox", "authoring", "errors"),
        "orsbox.bundle": ("authoring", "sandbox", "errors"),
        "orsbox.targets": ("bundle", "formats", "authoring", "sandbox", "errors"),
        # the server's configuration: which cell and backend a server runs with
        "orsbox.settings": ("server", "sandbox"),
        "orsbox.server": (
            *("formats", "authoring", "monitoring", "sandbox", "protocol", "errors"),
            *("settings", ROOT),  # ROOT: orsbox.__version__
        ),
        "orsbox.serving": ("server", "settings", "authoring"),
        ROOT: ("serving", "authoring", "protocol", "errors"),  # errors: GradingError
        "orsbox.client": ("errors", "protocol"),  # protocol: the reasons it reads back
        "orsbox.evaluation": ("client", "errors"),
        "orsbox.cluster": ("bundle", "sandbox", "errors", ROOT),
        # harnesses driving orsbox: Inspect's sandbox provider, Harbor's environment
        "orsbox.integrations": ("client", "formats", "sandbox", "errors"),
        "orsbox.cli": (
            *("client", "cluster", "evaluation", "integrations", "targets", "bundle"),
            *("serving", "settings"),
            *("server", "formats", "monitoring", "authoring", "sandbox", "protocol", "errors"),
            ROOT,
        ),
    }.items()
}

# Today's imports outside the allow-list, by importing module, each with why it is
# tolerated. Shrinking only: a module not listed fails, and so does an entry that no
# longer imports what it names (remove it).
KNOWN_EXCEPTIONS: dict[str, tuple[str, str]] = {
    "orsbox.formats.harbor": ("orsbox.settings", "reads allow_network; issue 24"),
    "orsbox.formats.swebench.environment": (
        "orsbox.settings",
        "reads the operator's default verdict (grading); issue 24",
    ),
}

# Only the factory and the Docker package itself may import the Docker package.
DOCKER = "orsbox.sandbox.docker"
DOCKER_IMPORTERS = ("orsbox.sandbox.config", DOCKER)
# Issue 24, item 1 removes these: images go through the backend's image store, host
# housekeeping and capabilities through the contract. A new one fails, and an entry that
# no longer reaches in fails until it is removed from here.
DOCKER_REACHES: frozenset[str] = frozenset()

# Only the factory tells backends apart: elsewhere, code asks the backend what it can do
# (`SandboxBackend.capabilities`), never which one it is (`kind`/`type` compared with a
# backend's name, `isinstance` with a backend's or a config's class).
BACKEND_NAMES = frozenset({"docker", "fake"})
BACKEND_CLASSES = frozenset(
    {"DockerConfig", "FakeConfig", "DockerBackend", "FakeBackend", "DockerSandbox", "FakeSandbox"}
)
KIND_DECIDERS = ("orsbox.sandbox.config", DOCKER, "orsbox.sandbox.fake")
# Issue 24, item 1 removes these (the image half): shrinking only, as DOCKER_REACHES.
KIND_CHECKS: frozenset[str] = frozenset()

# third-party packages a layer must never import (a prefix also forbids its submodules)
FORBIDDEN_PACKAGES = {
    "orsbox.protocol": ("docker", "fastapi", "starlette"),
    "orsbox.sandbox": ("fastapi", "starlette"),
    "orsbox.authoring": ("docker",),
    # images through the backend's image store (`orsbox.sandbox.images`), never the SDK
    **{
        f"orsbox.{layer}": ("docker",) for layer in ("formats", "bundle", "targets", "integrations")
    },
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
    return _imports_in(path.read_text(), module_name(path, root), path.name == "__init__.py")


@functools.cache
def _imports_in(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """Cached by content: the test of the test walks the package once per forbidden
    import, and only the file it changed needs parsing again."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source, module)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            origin = resolve(module, node, is_package)
            found.append((node.lineno, origin))
            found += [(node.lineno, f"{origin}.{alias.name}") for alias in node.names]
    return found


def reaches(imported: str, forbidden: str) -> bool:
    return imported == forbidden or imported.startswith(forbidden + ".")


def top_levels(root: Path) -> frozenset[str]:
    """The package's top-level modules and packages: its layers' names."""
    return frozenset(p.stem for p in root.glob("*.py")) | frozenset(
        p.parent.name for p in root.glob("*/__init__.py")
    )


def layer_of(name: str, tops: frozenset[str]) -> str:
    """The layer a dotted name under the package belongs to: `orsbox.X` for a top-level
    module or package X, else the package's own __init__ (`orsbox.__version__`)."""
    parts = name.split(".")
    return f"{ROOT}.{parts[1]}" if len(parts) > 1 and parts[1] in tops - {"__init__"} else ROOT


Imports = list[tuple[str, int, str]]


def package_imports(root: Path) -> Imports:
    """(module, line, imported) for every import of every module under `root`."""
    found = []
    for path in sorted(root.rglob("*.py")):
        module = module_name(path, root)
        found += [(module, line, imported) for line, imported in imports_of(path, root)]
    return found


def layer_violations(imports: Imports, tops: frozenset[str]) -> list[str]:
    """Imports of a layer outside its allow-list, not among `KNOWN_EXCEPTIONS`; and
    modules in no layer of the list."""
    found = set()
    for module, line, imported in imports:
        layer = layer_of(module, tops)
        if layer not in ALLOWED:
            found.add(f"{module} is in no layer of ALLOWED")
            continue
        if not reaches(imported, ROOT) or layer_of(imported, tops) in {layer, *ALLOWED[layer]}:
            continue
        known = next((k for k in KNOWN_EXCEPTIONS if reaches(module, k)), None)
        if known is None or not reaches(imported, KNOWN_EXCEPTIONS[known][0]):
            found.add(f"{module} (line {line}) imports {imported}")
    return sorted(found)


def docker_reaches(imports: Imports) -> dict[str, list[str]]:
    """Module -> what it imports of the Docker package, for modules outside it and the factory."""
    found: dict[str, list[str]] = {}
    for module, line, imported in imports:
        if reaches(imported, DOCKER) and not any(reaches(module, m) for m in DOCKER_IMPORTERS):
            found.setdefault(module, []).append(f"line {line}: {imported}")
    return found


def docker_violations(imports: Imports) -> list[str]:
    reached = docker_reaches(imports)
    return sorted(
        f"{module} imports {DOCKER} ({reached[module][0]}): go through the sandbox contract"
        for module in set(reached) - DOCKER_REACHES
    )


@functools.cache
def _kind_checks_in(source: str) -> list[int]:
    """Lines of `source` that tell backends apart by name or class."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if (isinstance(node, ast.Compare) and _compares_kind(node))
        or (isinstance(node, ast.Call) and _isinstance_of_backend(node))
    ]


def _compares_kind(node: ast.Compare) -> bool:
    operands = [node.left, *node.comparators]
    named = any(isinstance(o, ast.Constant) and o.value in BACKEND_NAMES for o in operands)
    return named and any(
        isinstance(o, ast.Attribute) and o.attr in ("kind", "type") for o in operands
    )


def _isinstance_of_backend(node: ast.Call) -> bool:
    if (
        not (isinstance(node.func, ast.Name) and node.func.id == "isinstance")
        or len(node.args) != 2
    ):
        return False
    classes = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
    names = {c.id if isinstance(c, ast.Name) else getattr(c, "attr", "") for c in classes}
    return bool(names & BACKEND_CLASSES)


def kind_checks(root: Path) -> dict[str, list[int]]:
    """Module -> lines that tell backends apart, outside the factory and the backends."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        module = module_name(path, root)
        if any(reaches(module, m) for m in KIND_DECIDERS):
            continue
        if lines := _kind_checks_in(path.read_text()):
            found[module] = lines
    return found


def kind_violations(root: Path) -> list[str]:
    found = kind_checks(root)
    return sorted(
        f"{module} (line {found[module][0]}) tells backends apart: ask `backend.capabilities`"
        for module in set(found) - KIND_CHECKS
    )


def package_violations(imports: Imports) -> list[str]:
    found = set()
    for module, line, imported in imports:
        banned = next((b for layer, b in FORBIDDEN_PACKAGES.items() if reaches(module, layer)), ())
        if any(reaches(imported, package) for package in banned):
            found.add(f"{module} (line {line}) imports {imported}")
    return sorted(found)


def violations(root: Path) -> list[str]:
    """Everything the layering forbids, in the package at `root`."""
    imports = package_imports(root)
    return (
        layer_violations(imports, top_levels(root))
        + docker_violations(imports)
        + package_violations(imports)
        + kind_violations(root)
    )


def test_every_layer_imports_only_what_it_may() -> None:
    found = layer_violations(package_imports(PACKAGE_ROOT), top_levels(PACKAGE_ROOT))
    assert not found, "imports outside the layer's allow-list (ALLOWED):\n" + "\n".join(found)


def test_docker_is_imported_only_by_the_factory_and_itself() -> None:
    found = docker_violations(package_imports(PACKAGE_ROOT))
    assert not found, "\n".join(found)


def test_only_the_factory_tells_backends_apart() -> None:
    found = kind_violations(PACKAGE_ROOT)
    assert not found, "\n".join(found)


def test_layers_keep_third_party_packages_out() -> None:
    found = package_violations(package_imports(PACKAGE_ROOT))
    assert not found, "\n".join(found)


def test_the_known_exceptions_still_occur() -> None:
    """The lists only shrink: an entry fixed is an entry to remove."""
    imports = package_imports(PACKAGE_ROOT)
    fixed = DOCKER_REACHES - set(docker_reaches(imports))
    assert not fixed, f"no longer reaching into {DOCKER} (remove from DOCKER_REACHES): {fixed}"
    fixed = KIND_CHECKS - set(kind_checks(PACKAGE_ROOT))
    assert not fixed, f"no longer telling backends apart (remove from KIND_CHECKS): {fixed}"
    for module, (imported, _) in KNOWN_EXCEPTIONS.items():
        assert any(reaches(m, module) and reaches(i, imported) for m, _, i in imports), (
            f"{module} no longer imports {imported}: remove it from KNOWN_EXCEPTIONS"
        )


# -- the test of the test -------------------------------------------------------------------
@pytest.fixture(scope="module")
def package_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the package's sources, where forbidden imports are added one at a time."""
    copy = tmp_path_factory.mktemp("layering") / ROOT
    shutil.copytree(PACKAGE_ROOT, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return copy


def forbidden_pairs() -> list[tuple[str, str]]:
    """(layer, other layer) for every layer pair the allow-list does not permit."""
    return [
        (layer, other)
        for layer, other in itertools.permutations(ALLOWED, 2)
        if other not in ALLOWED[layer]
    ]


def probe_file(copy: Path, layer: str) -> Path:
    """A new module inside `layer` of the copy (beside a top-level module: its layer is
    the module itself, so the probe becomes the module's own body)."""
    if layer == ROOT:
        return copy / "__init__.py"
    target = copy / layer.split(".")[1]
    return target / "layering_probe.py" if target.is_dir() else target.with_suffix(".py")


def with_probe(copy: Path, layer: str, source: str) -> list[str]:
    """The copy's violations with `source` appended to a module of `layer`."""
    path = probe_file(copy, layer)
    before = path.read_text() if path.exists() else None
    path.write_text((before or "") + "\n" + source + "\n")
    try:
        return violations(copy)
    finally:
        path.unlink() if before is None else path.write_text(before)


def test_the_copy_is_clean(package_copy: Path) -> None:
    assert violations(package_copy) == []


@pytest.mark.parametrize(("layer", "other"), forbidden_pairs())
def test_each_forbidden_layer_import_fails(package_copy: Path, layer: str, other: str) -> None:
    found = with_probe(package_copy, layer, f"def later():\n    import {other}.anything\n")
    assert any(f"imports {other}.anything" in line for line in found), found


@pytest.mark.parametrize(
    "module",
    ["orsbox/formats/swebench/grading.py", "orsbox/authoring/container.py", "orsbox/server/app.py"],
)
def test_a_new_reach_into_docker_fails(package_copy: Path, module: str) -> None:
    path = package_copy.parent / module
    before = path.read_text()
    path.write_text(before + "\nfrom orsbox.sandbox.docker.engine import connect\n")
    try:
        found = violations(package_copy)
    finally:
        path.write_text(before)
    assert any(f"imports {DOCKER}" in line for line in found), found


@pytest.mark.parametrize(
    "check",
    [
        'if backend.kind == "docker":\n    pass',
        'ok = settings.backend.type != "fake"',
        "ok = isinstance(settings.backend, DockerConfig)",
        "ok = isinstance(backend, (WarmPool, docker.DockerBackend))",
    ],
)
def test_a_new_kind_check_fails(package_copy: Path, check: str) -> None:
    found = with_probe(package_copy, "orsbox.server", check)
    assert any("tells backends apart" in line for line in found), found


@pytest.mark.parametrize(
    ("layer", "package"), [(k, p) for k, ps in FORBIDDEN_PACKAGES.items() for p in ps]
)
def test_each_forbidden_package_fails(package_copy: Path, layer: str, package: str) -> None:
    assert any(package in line for line in with_probe(package_copy, layer, f"import {package}"))


def test_a_module_in_no_layer_fails(package_copy: Path) -> None:
    (package_copy / "stray.py").write_text("import orsbox.errors\n")
    try:
        assert violations(package_copy) == ["orsbox.stray is in no layer of ALLOWED"]
    finally:
        (package_copy / "stray.py").unlink()


def test_walker_names_function_level_relative_and_plain_imports(tmp_path: Path) -> None:
    layer = tmp_path / "orsbox" / "sandbox"
    layer.mkdir(parents=True)
    (layer / "__init__.py").write_text("from . import sub\n")
    (layer / "sub.py").write_text(
        "import dockerfile\ndef f():\n    from ..server import app\n    import docker.errors\n"
    )
    found = [
        (line, name)
        for path in [layer / "sub.py"]
        for line, name in imports_of(path, tmp_path / "orsbox")
    ]
    assert found == [
        (1, "dockerfile"),
        (3, "orsbox.server"),
        (3, "orsbox.server.app"),
        (4, "docker.errors"),
    ]
