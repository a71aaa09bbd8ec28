"""Imports run one way, by an allow-list: each layer of the package names the layers it
may import, and anything else fails, so a new reach upwards is caught the day it is
written. Walking every module's imports with `ast` keeps it that way; an import inside
a function counts as much as one at the top.

The layers, bottom up: `errors` (the shared vocabulary) and `clock` (where timeouts
read the time) import nothing; `protocol` (the wire) sees `clock`; `sandbox` sees
`protocol`; `authoring` sees the sandbox contract; `formats` are loaders producing
environments; the `server` sees everything below; the `cli` sees all.

The backend seam (docs/backends.md): each backend lives in its home, a package of its own
under orsbox/sandbox, and the factory (`orsbox/sandbox/config.py`) is the one module that
imports a home. The homes are read from the factory's `BACKENDS` and the config classes
it lists (`factory_backends`), never listed here: a new backend's line in the factory is
all it takes for every rule below to hold it. Outside the homes and the factory nothing
names a backend's classes or engine address (`ENGINE_WORDS`), nor, besides the host's
room (`orsbox.sandbox.host`: the egress guard, proxies and owner labels any backend may
use), the host tools or the owner labels' keys (`HOST_WORDS`); only the factory tells
backends apart (`KIND_DECIDERS`): elsewhere code asks the backend what it can do
(`SandboxBackend.capabilities`). A backend's SDK (the packages its config's `sdk` names:
Docker's `docker`) is imported in its home only (`SDK_HOMES`): images are built, pulled
and pushed through the backend's image store. A home imports only the neutral contract
(`orsbox.errors` and the sandbox modules that are no home and not the factory), and so
does the skeleton backend in tests/skeleton_backend/, the files a pod-per-session backend
adds: that is what keeps docs/backends.md's file count true. The conformance suite
(tests/sandbox/, marked `conformance`) imports no home and tells no backend apart: what
differs is a capability or a named difference (tests/runtimes.py).

The tests at the bottom are the test of this test: every forbidden import, added to a
temporary copy of the package, makes it fail; so does a new comparison of kinds, a new
reach into a home and a backend's word outside it."""

from __future__ import annotations

import ast
import functools
import itertools
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parent.parent / "orsbox"
ROOT = "orsbox"  # the package's own __init__: the public API (`orsbox.Environment`, ...)
TESTS_ROOT = PACKAGE_ROOT.parent / "tests"
SKELETON = "tests.skeleton_backend"  # a backend with no body (docs/backends.md)
SKELETON_ROOT = TESTS_ROOT / "skeleton_backend"

# layer -> the other layers it may import (its own submodules always)
ALLOWED: dict[str, frozenset[str]] = {
    name: frozenset(f"orsbox.{layer}" if layer != ROOT else ROOT for layer in layers)
    for name, layers in {
        "orsbox.errors": (),
        "orsbox.clock": (),
        "orsbox.protocol": ("clock",),  # the reconnect buffer's linger
        "orsbox.sandbox": ("protocol", "errors", "clock"),
        "orsbox.authoring": ("protocol", "sandbox", "errors", "clock"),
        "orsbox.formats": ("authoring", "sandbox", "protocol", "errors"),
        # episodes record what graders report (authoring's reward-hacking findings)
        "orsbox.monitoring": ("protocol", "sandbox", "authoring", "errors"),
        "orsbox.bundle": ("authoring", "sandbox", "errors"),
        "orsbox.targets": ("bundle", "formats", "authoring", "sandbox", "errors"),
        # the server's configuration: which cell and backend a server runs with
        "orsbox.settings": ("server", "sandbox"),
        "orsbox.server": (
            *("formats", "authoring", "monitoring", "sandbox", "protocol", "errors"),
            *("settings", "clock", ROOT),  # ROOT: orsbox.__version__
        ),
        "orsbox.serving": ("server", "settings", "authoring"),
        ROOT: ("serving", "authoring", "protocol", "errors"),  # errors: GradingError
        # protocol: the reasons it reads back; clock: what paces a session's pings
        "orsbox.client": ("errors", "protocol", "clock"),
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

SANDBOX = "orsbox.sandbox"
FACTORY = "orsbox.sandbox.config"


@dataclass(frozen=True)
class Backend:
    """One backend the factory lists, as its sources say: `tag` its config's `type`,
    `home` the package that is the backend (which only the factory imports), `sdk` the
    third-party packages only it may import (`BackendConfig.sdk`)."""

    tag: str
    home: str
    sdk: tuple[str, ...] = ()


def factory_backends(factory: str, root: Path = PACKAGE_ROOT.parent) -> list[Backend]:
    """The backends `BACKENDS` lists in the factory's source `factory`, each read from its
    config class's source under `root`. Derived, never listed here: the factory's line
    that registers a new backend makes it a home for every rule below, with no edit to
    this test (`test_a_backend_added_to_the_factory_needs_no_edit_here`)."""
    tree = ast.parse(factory)
    origin = {
        alias.asname or alias.name: node.module or ""
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    listed = next(
        node.value
        for node in tree.body
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "BACKENDS"
    )
    assert isinstance(listed, ast.Tuple), "BACKENDS is a tuple of config classes"
    return [_backend(origin[getattr(e, "id", "")], getattr(e, "id", ""), root) for e in listed.elts]


def _backend(module: str, config: str, root: Path) -> Backend:
    path = _source_of(module, root)
    body = next(
        node.body
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.ClassDef) and node.name == config
    )
    fields = {
        node.target.id: node.value
        for node in body
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value
    }
    sdk = tuple(ast.literal_eval(fields["sdk"])) if "sdk" in fields else ()
    return Backend(ast.literal_eval(fields["type"]), home_of_config(module, path), sdk)


def _source_of(module: str, root: Path) -> Path:
    base = root.joinpath(*module.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def home_of_config(module: str, path: Path) -> str:
    """A backend's home: the child of orsbox.sandbox that holds its config
    (`orsbox.sandbox.docker`), or, for one outside the package (the skeleton), the
    package that holds it."""
    if module.startswith(SANDBOX + "."):
        return ".".join(module.split(".")[:3])
    return module if path.name == "__init__.py" else module.rsplit(".", 1)[0]


def home_classes(homes: tuple[str, ...], root: Path = PACKAGE_ROOT.parent) -> frozenset[str]:
    """The classes the homes define (a backend's, its config's, its sandbox's...)."""
    names: set[str] = set()
    for home in homes:
        base = root.joinpath(*home.split("."))
        for path in sorted(base.rglob("*.py")) if base.is_dir() else [base.with_suffix(".py")]:
            tree = ast.parse(path.read_text())
            names |= {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    return frozenset(names)


# Each backend's home (by its tag): the package that is that backend, which only the
# factory imports.
BACKENDS = factory_backends((PACKAGE_ROOT / "sandbox" / "config.py").read_text())
BACKEND_HOMES = {backend.tag: backend.home for backend in BACKENDS}
HOMES = tuple(BACKEND_HOMES.values())
DOCKER = "orsbox.sandbox.docker"  # the tests of this test reach into it
NEUTRAL_OUTSIDE_SANDBOX = ("orsbox.errors",)  # what a home may import besides the sandbox's

# Only the factory tells backends apart: elsewhere, code asks the backend what it can do
# (`SandboxBackend.capabilities`), never which one it is (`kind`/`type` compared with a
# backend's name, `isinstance` with a class a backend's home defines).
BACKEND_NAMES = frozenset(BACKEND_HOMES)
BACKEND_CLASSES = home_classes(HOMES)
KIND_DECIDERS = (FACTORY, *HOMES)
# Issue 24, item 1 removes these (the image half): shrinking only.
KIND_CHECKS: frozenset[str] = frozenset()

# What only a backend's home says: the words of its engine, in code (not in docstrings or
# a logger's name), besides the names of the classes its home defines.
ENGINE_WORDS = re.compile(r"\b(DOCKER_HOST|kubectl)\b|^unix://|^docker$")
# The host's room (`orsbox.sandbox.host`: the egress guard, the proxies, the owner labels)
# is neutral: any backend may use it, and it alone says the host tools' words and the
# owner labels' keys (read from its owner module) besides the homes; no engine's words.
HOST_ROOM = "orsbox.sandbox.host"
OWNER = f"{HOST_ROOM}.owner"
HOST_WORDS = re.compile(r"\b(iptables|ip6tables|squid)\b")
BACKEND_WORDS = re.compile(f"{ENGINE_WORDS.pattern}|{HOST_WORDS.pattern}")
# Modules that still say them, with why; shrinking only (an entry no longer saying any
# fails until it is removed).
KNOWN_BACKEND_WORDS: dict[str, str] = {
    "orsbox.cluster": "`orsbox cluster up` deploys cells each with a private Docker engine "
    "(docs/cluster.md): deployment around the Docker backend, not the sandbox contract",
    "orsbox.integrations.harbor": "an error message (user-visible) pointing at the "
    "server's squid allow-lists",
}

# third-party packages a layer must never import (a prefix also forbids its submodules)
FORBIDDEN_PACKAGES = {
    "orsbox.protocol": ("fastapi", "starlette"),
    "orsbox.sandbox": ("fastapi", "starlette"),
}
# a backend's SDK (`BackendConfig.sdk`), imported in its home only: elsewhere images go
# through the backend's image store (`orsbox.sandbox.images`: builds, pulls, pushes),
# sandboxes through the contract
SDK_HOMES = {package: backend.home for backend in BACKENDS for package in backend.sdk}


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


def package_imports(folder: Path, root: Path | None = None) -> Imports:
    """(module, line, imported) for every import of every module under `folder`, named
    from `root` (default: `folder` is the package's root)."""
    root = root or folder
    found = []
    for path in sorted(folder.rglob("*.py")):
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


def home_of(module: str) -> str | None:
    """The backend home `module` belongs to, if any."""
    return next((home for home in HOMES if reaches(module, home)), None)


def backend_reaches(imports: Imports) -> dict[str, list[str]]:
    """Module -> what it imports of a backend's home, for modules outside it and the factory."""
    found: dict[str, list[str]] = {}
    for module, line, imported in imports:
        home = home_of(imported)
        if home is None or module == FACTORY or reaches(module, home):
            continue
        found.setdefault(module, []).append(f"line {line}: {imported}")
    return found


def backend_violations(imports: Imports) -> list[str]:
    reached = backend_reaches(imports)
    return sorted(
        f"{module} imports a backend ({reached[module][0]}): go through the sandbox contract"
        for module in reached
    )


def neutral(imported: str) -> bool:
    """Part of the neutral contract: `orsbox.errors`, or a sandbox module that is no
    backend's home and not the factory (nor the package's face, which imports it)."""
    if any(reaches(imported, m) for m in NEUTRAL_OUTSIDE_SANDBOX):
        return True
    inside = imported.startswith("orsbox.sandbox.")
    return inside and home_of(imported) is None and not reaches(imported, FACTORY)


def contract_violations(imports: Imports, home: str, own: tuple[str, ...]) -> list[str]:
    """Imports of orsbox by `home`'s modules that are neither `own` nor neutral."""
    return sorted(
        f"{module} (line {line}) imports {imported}: a backend sees the neutral contract only"
        for module, line, imported in imports
        if reaches(module, home)
        and (reaches(imported, ROOT) or reaches(imported, "tests"))
        and not any(reaches(imported, m) for m in own)
        and not neutral(imported)
    )


def home_violations(imports: Imports) -> list[str]:
    return [found for home in HOMES for found in contract_violations(imports, home, (home,))]


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring constants in `tree`."""
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, kinds)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def _logger_names(tree: ast.AST) -> set[int]:
    """ids of the constants naming a logger (`logging.getLogger("orsbox.server")`)."""
    return {
        id(arg)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "getLogger"
        for arg in node.args
    }


def home_vocabulary(sources: dict[str, tuple[str, str]]) -> frozenset[str]:
    """The classes the homes define (`sources`: module -> (file name, source))."""
    words: set[str] = set()
    for module, (_, source) in sources.items():
        if home_of(module) is not None:
            words |= _vocabulary_in(source, labels=False)
    return frozenset(words)


def owner_vocabulary(sources: dict[str, tuple[str, str]]) -> frozenset[str]:
    """The owner labels' keys (`orsbox.sandbox.host.owner`)."""
    return _vocabulary_in(sources[OWNER][1], labels=True) if OWNER in sources else frozenset()


@functools.cache
def _vocabulary_in(source: str, *, labels: bool) -> frozenset[str]:
    """The classes a home's module defines; with `labels`, its dotted label keys too."""
    tree = ast.parse(source)
    words = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    if labels:
        words |= {
            node.value.value
            for node in tree.body
            if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
            and "." in node.value.value
        }
    return frozenset(words)


@functools.cache
def words_in(
    source: str, vocabulary: frozenset[str], words: re.Pattern[str] = BACKEND_WORDS
) -> list[tuple[int, str]]:
    """(line, word) for each backend word (`vocabulary`, `words`) `source` says in code."""
    tree = ast.parse(source)
    skipped = _docstrings(tree) | _logger_names(tree)
    found = []
    for node in ast.walk(tree):
        name = getattr(node, "id", None) or getattr(node, "attr", None)
        if isinstance(node, ast.alias):
            name = node.name.rsplit(".", 1)[-1]
        if name in vocabulary:
            found.append((getattr(node, "lineno", 0), name))
        said = isinstance(node, ast.Constant) and isinstance(node.value, str)
        if said and id(node) not in skipped and _is_backend_word(node.value, vocabulary, words):
            found.append((node.lineno, node.value[:60]))
    return found


def _is_backend_word(text: str, vocabulary: frozenset[str], words: re.Pattern[str]) -> bool:
    return text in vocabulary or words.search(text) is not None


def backend_words(root: Path) -> dict[str, list[tuple[int, str]]]:
    """Module -> the backend words it says, outside the homes and the factory (in the
    host's room: an engine's words or a home's classes)."""
    sources = {
        module_name(path, root): (path.name, path.read_text()) for path in root.rglob("*.py")
    }
    classes = home_vocabulary(sources)
    vocabulary = classes | owner_vocabulary(sources)
    found = {}
    for module, (_, source) in sorted(sources.items()):
        if module == FACTORY or home_of(module) is not None:
            continue
        if reaches(module, HOST_ROOM):
            said = words_in(source, classes, ENGINE_WORDS)
        else:
            said = words_in(source, vocabulary)
        if said:
            found[module] = said
    return found


def conformance_modules() -> list[Path]:
    """The conformance suite's modules (marked `conformance`)."""
    return [
        path
        for path in sorted((TESTS_ROOT / "sandbox").glob("*.py"))
        if "pytest.mark.conformance" in path.read_text()
    ]


def conformance_violations(paths: list[Path], root: Path = TESTS_ROOT) -> list[str]:
    """Imports of a backend's home, kind checks, and a look at a backend's own parts
    (its `config`, its `engine`) in conformance modules."""
    found = []
    for path in paths:
        module, source = module_name(path, root), path.read_text()
        found += [
            f"{module} (line {line}) imports {imported}: ask `under_test`"
            for line, imported in imports_of(path, root)
            if home_of(imported) is not None
        ]
        found += [
            f"{module} (line {line}) tells backends apart" for line in _kind_checks_in(source)
        ]
        found += [
            f"{module} (line {node.lineno}) reads a backend's .{node.attr}: ask `under_test`"
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Attribute) and node.attr in ("config", "engine")
        ]
    return sorted(found)


def word_violations(root: Path) -> list[str]:
    return sorted(
        f"{module} (line {said[0][0]}) says {said[0][1]!r}: a backend's word, for its home"
        for module, said in backend_words(root).items()
        if not any(reaches(module, known) for known in KNOWN_BACKEND_WORDS)
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
        if any(
            reaches(imported, sdk) and not reaches(module, home) for sdk, home in SDK_HOMES.items()
        ):
            found.add(f"{module} (line {line}) imports {imported} outside its backend's home")
    return sorted(found)


def violations(root: Path) -> list[str]:
    """Everything the layering forbids, in the package at `root`."""
    imports = package_imports(root)
    return (
        layer_violations(imports, top_levels(root))
        + backend_violations(imports)
        + home_violations(imports)
        + package_violations(imports)
        + kind_violations(root)
        + word_violations(root)
    )


def test_every_layer_imports_only_what_it_may() -> None:
    found = layer_violations(package_imports(PACKAGE_ROOT), top_levels(PACKAGE_ROOT))
    assert not found, "imports outside the layer's allow-list (ALLOWED):\n" + "\n".join(found)


def test_a_backend_is_imported_only_by_the_factory_and_itself() -> None:
    found = backend_violations(package_imports(PACKAGE_ROOT))
    assert not found, "\n".join(found)


def test_the_backends_read_from_the_factory_s_source_are_the_factory_s() -> None:
    """Each a package of its own under orsbox/sandbox (its room: nothing else of the
    package is its), holding its config; tag and SDK as the config class says."""
    from orsbox.sandbox.config import BACKENDS as LISTED

    assert [(b.tag, b.sdk) for b in BACKENDS] == [(c.tag(), c.sdk) for c in LISTED]
    for backend, config in zip(BACKENDS, LISTED, strict=True):
        assert reaches(config.__module__, backend.home), (backend, config)
        assert _source_of(backend.home, PACKAGE_ROOT.parent).name == "__init__.py", backend


def test_a_backend_added_to_the_factory_needs_no_edit_here() -> None:
    """docs/backends.md's registration of a new backend, for the skeleton: its config
    imported into the factory and added to `BACKENDS`. The rules then hold it as a home
    (only the factory imports it; it imports only the neutral contract; its name and
    classes tell backends apart) with nothing listed in this file."""
    factory = (PACKAGE_ROOT / "sandbox" / "config.py").read_text()
    registered = re.sub(
        r"^(BACKENDS: .*= \(.*)\)$",
        r"\1, SkeletonConfig)",
        factory.replace(
            "\nfrom orsbox.sandbox.",
            "\nfrom tests.skeleton_backend import SkeletonConfig\nfrom orsbox.sandbox.",
            1,
        ),
        flags=re.MULTILINE,
    )
    assert registered.count("SkeletonConfig") == 2, "the factory's BACKENDS line changed shape"
    added = set(factory_backends(registered)) - set(BACKENDS)
    assert added == {Backend("skeleton", SKELETON)}
    assert "SkeletonBackend" in home_classes((SKELETON,))
    imports = package_imports(SKELETON_ROOT, root=TESTS_ROOT)
    assert contract_violations(imports, SKELETON, (SKELETON,)) == []


def test_a_backend_imports_only_the_neutral_contract() -> None:
    found = home_violations(package_imports(PACKAGE_ROOT))
    assert not found, "\n".join(found)


def test_only_a_backend_says_its_words() -> None:
    """Its classes, engine, host tools and owner labels stay in its home."""
    found = word_violations(PACKAGE_ROOT)
    assert not found, "\n".join(found)


def test_the_skeleton_backend_imports_only_the_neutral_contract() -> None:
    """The files a pod-per-session backend adds (tests/skeleton_backend/) need nothing
    but the contract: no other backend, no layer above the sandbox, not the factory."""
    imports = package_imports(SKELETON_ROOT, root=TESTS_ROOT)
    assert {m for m, _, _ in imports} >= {SKELETON, f"{SKELETON}.backend", f"{SKELETON}.images"}
    found = contract_violations(imports, SKELETON, (SKELETON,))
    assert not found, "\n".join(found)


def test_the_conformance_suite_tells_no_backend_apart() -> None:
    """Its tests name no backend: a difference is a capability or a named entry of the
    backend's differences (tests/runtimes.py, which alone knows the backends)."""
    found = conformance_violations(conformance_modules())
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
    saying = set(backend_words(PACKAGE_ROOT))
    for known in KNOWN_BACKEND_WORDS:
        assert any(reaches(m, known) for m in saying), f"{known}: remove from KNOWN_BACKEND_WORDS"
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
    ("module", "reach"),
    [
        ("orsbox/formats/swebench/grading.py", "from orsbox.sandbox.docker.engine import connect"),
        ("orsbox/authoring/container.py", "from orsbox.sandbox.docker.config import DockerConfig"),
        ("orsbox/server/app.py", "from orsbox.sandbox.fake import FakeBackend"),
        ("orsbox/sandbox/pool.py", "import orsbox.sandbox.fake.images"),
        ("orsbox/sandbox/fake/__init__.py", "from orsbox.sandbox.docker import guarded"),
        ("orsbox/sandbox/host/egress.py", "from orsbox.sandbox.docker.engine import Engine"),
    ],
)
def test_a_new_reach_into_a_backend_fails(package_copy: Path, module: str, reach: str) -> None:
    found = with_source(package_copy / module.removeprefix("orsbox/"), reach)
    assert any("imports a backend" in line for line in found), found


@pytest.mark.parametrize(
    "reach",
    [
        "from orsbox.server import app",
        "from orsbox.sandbox.config import create_backend",
        "from orsbox.sandbox import SandboxSpec",
        "from orsbox.authoring import tools",
    ],
)
def test_a_backend_reaching_past_the_contract_fails(package_copy: Path, reach: str) -> None:
    found = with_source(package_copy / "sandbox" / "docker" / "guarded.py", reach)
    assert any("a backend sees the neutral contract only" in line for line in found), found


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("server/app.py", 'ENGINE = "unix:///var/run/docker.sock"'),
        ("cli/doctor.py", 'FIX = "apt-get install iptables"'),
        ("server/policy.py", 'HOST = os.environ["DOCKER_HOST"]'),
        ("cli/ps.py", 'ARGV = ["docker", "ps"]'),
        ("cli/gc.py", "def f(x):\n    return x.DockerSandbox"),
        ("server/sessions.py", 'KEY = "orsbox.pid_start"'),
        ("sandbox/host/egress.py", 'ARGV = ["docker", "network", "ls"]'),
        ("sandbox/host/proxy.py", "def f(x):\n    return x.DockerSandbox"),
    ],
)
def test_a_backend_word_outside_its_home_fails(
    package_copy: Path, module: str, source: str
) -> None:
    found = with_source(package_copy / module, source)
    assert any("a backend's word" in line for line in found), found


def test_docstrings_and_logger_names_are_not_words() -> None:
    source = '"""Docker: iptables and squid."""\nimport logging\nlog = logging.getLogger("orsbox.host")\n'
    assert words_in(source, frozenset({"orsbox.host"})) == []


def with_source(path: Path, source: str) -> list[str]:
    """The copy's violations with `source` appended to the module at `path`."""
    before = path.read_text()
    path.write_text(before + "\n" + source + "\n")
    try:
        return violations(next(p for p in path.parents if p.name == ROOT))
    finally:
        path.write_text(before)


@pytest.mark.parametrize(
    "source",
    [
        "from orsbox.sandbox.docker import DockerBackend",
        "from orsbox.sandbox.fake import FakeSandbox",
        "def f(backend):\n    return backend.config.runtime == 'runsc'",
        "def f(backend):\n    return backend.engine.kill('x')",
        "def f(s):\n    return isinstance(s, FakeSandbox)",
    ],
)
def test_a_conformance_test_naming_a_backend_fails(tmp_path: Path, source: str) -> None:
    probe = tmp_path / "tests" / "sandbox" / "test_probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text(f"import pytest\npytestmark = pytest.mark.conformance\n{source}\n")
    assert conformance_violations([probe], tmp_path / "tests"), source


@pytest.mark.parametrize(
    "reach",
    ["from tests.under_test import UNDER_TEST", "from orsbox.sandbox.docker import guarded"],
)
def test_a_skeleton_reaching_past_the_contract_fails(tmp_path: Path, reach: str) -> None:
    copy = tmp_path / "tests" / "skeleton_backend"
    shutil.copytree(SKELETON_ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "images.py").write_text((copy / "images.py").read_text() + reach + "\n")
    imports = package_imports(copy, root=tmp_path / "tests")
    assert contract_violations(imports, SKELETON, (SKELETON,))


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


@pytest.mark.parametrize("layer", [layer for layer in ALLOWED if layer != "orsbox.sandbox"])
def test_a_backends_sdk_outside_its_home_fails(package_copy: Path, layer: str) -> None:
    """Every layer but the sandbox's, whose Docker home alone may (the next test)."""
    found = with_probe(package_copy, layer, "import docker.errors")
    assert any("docker.errors outside its backend's home" in line for line in found), found


def test_a_backends_sdk_in_the_sandbox_layer_only_in_its_home(package_copy: Path) -> None:
    neutral = package_copy / "sandbox" / "layering_probe.py"
    home = package_copy / "sandbox" / "docker" / "layering_probe.py"
    for path in (neutral, home):
        path.write_text("import docker\n")
    try:
        found = violations(package_copy)
    finally:
        neutral.unlink()
        home.unlink()
    assert found == [
        "orsbox.sandbox.layering_probe (line 1) imports docker outside its backend's home"
    ]


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
