"""The guest's payload: its package (`inside/`) as one blob, built once per server
process, sent once per sandbox.

The loader (`loader.py`) reads it from stdin in the main guest; a sub-guest's loader
reads the copy the main guest keeps (`inside/keep.py`), checked against `digest`.

Layout: two 10-digit lengths, then the package compiled by the host's python (its
4-byte magic number, then a marshal of `(entry, ((module, is_package, code), ...))`),
then its source (a marshal of the same with source text for code). Modules come in
the order they import each other, so the loader runs each after what it imports. The
code is compiled without docstrings (`optimize=2`: a fifth fewer bytes to send and
unmarshal; the asserts it also drops only tell the type checker that the shell is
there, and without them a missing one fails on None all the same). A
sandbox whose python has the host's magic number runs the compiled code and skips
compiling ~1,400 lines, a good part of a cold start; any other python (3.7 or later)
compiles the source. The magic number changes with every change of the bytecode
format, so equal magic means the code objects load as compiled.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import marshal
from dataclasses import dataclass
from pathlib import Path

INSIDE = Path(__file__).parent / "inside"
PACKAGE = "orsbox_guest"  # the package's name inside the sandbox
ENTRY = f"{PACKAGE}.serve"  # its `main(argv, payload)` is what the loader calls
GUEST_NAME = "orsbox-guest"  # code file names start with it; `ps` shows it in the loader


@dataclass(frozen=True)
class Payload:
    data: bytes
    digest: str  # SHA-256 of `data`, hex: what a sub-guest's loader checks its copy against

    @property
    def size(self) -> int:
        return len(self.data)


@functools.cache
def guest_payload() -> Payload:
    """Made once per process: compiling the guest takes tens of milliseconds, not to be
    spent on the event loop per sandbox started."""
    modules = guest_modules()
    code = tuple(
        (name, pkg, compile(text, filename(name), "exec", optimize=2))
        for name, pkg, text in modules
    )
    compiled = importlib.util.MAGIC_NUMBER + marshal.dumps((ENTRY, code))
    source = marshal.dumps((ENTRY, tuple(modules)))
    data = b"%010d%010d" % (len(compiled), len(source)) + compiled + source
    return Payload(data, hashlib.sha256(data).hexdigest())


def guest_modules() -> list[tuple[str, bool, str]]:
    """(module name inside the sandbox, is a package, source), each after the modules
    it imports."""
    sources = {module_name(path): path.read_text() for path in sorted(INSIDE.glob("*.py"))}
    order: list[str] = []

    def visit(name: str, seen: tuple[str, ...]) -> None:
        if name in order:
            return
        if name in seen:
            raise ValueError(f"the guest's modules import in a circle: {' -> '.join(seen)}")
        for imported in own_imports(name, sources[name]):
            visit(imported, (*seen, name))
        order.append(name)

    visit(PACKAGE, ())  # the package first: its modules' parent
    for name in sources:
        visit(name, ())
    return [(name, name == PACKAGE, sources[name]) for name in order]


def module_name(path: Path) -> str:
    return PACKAGE if path.stem == "__init__" else f"{PACKAGE}.{path.stem}"


def filename(name: str) -> str:
    inner = name.removeprefix(PACKAGE).lstrip(".") or "__init__"
    return f"{GUEST_NAME}/{inner}.py"


def own_imports(name: str, source: str) -> list[str]:
    """The package's modules `name` imports at its top level (relative imports)."""
    found = [PACKAGE] if name != PACKAGE else []
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.append(f"{PACKAGE}.{node.module}")
            else:
                found += [f"{PACKAGE}.{alias.name}" for alias in node.names]
    return found
