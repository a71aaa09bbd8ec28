"""The guest as a package (orsbox/sandbox/guest/inside/) and its payload: what the package
may contain to run in any image's python, the payload's order and digest, and, on a
real sandbox, that a sub-guest (`exec(user=...)`) loads the main guest's copy instead
of receiving the payload again, and never runs a copy that was changed."""

from __future__ import annotations

import ast
import importlib.util
import marshal
import subprocess
import sys
from pathlib import Path

import pytest

from orsbox.errors import SandboxError
from orsbox.sandbox import SandboxBackend, SandboxSpec
from orsbox.sandbox.guest import payload as guest
from orsbox.sandbox.guest.loader import LOADER
from orsbox.sandbox.guest.payload import PACKAGE, Payload, guest_modules, guest_payload
from tests.sandbox.conftest import BASE_IMAGE
from tests.under_test import UNDER_TEST

INSIDE = Path(guest.__file__).parent / "inside"
SOURCES = sorted(INSIDE.glob("*.py"))
OLDEST_PYTHON = (3, 7)  # the loader's and the package's: images bring their own python3
IMMUTABLE_CALLS = {"Struct", "sysconf", "encode", "frozenset", "tuple"}


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_each_module_is_python_3_7_stdlib_and_relative_imports(path: Path) -> None:
    tree = ast.parse(path.read_text(), feature_version=OLDEST_PYTHON)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        else:
            continue
        for name in names:
            assert name.split(".")[0] in sys.stdlib_module_names, f"{path.name}: {name}"
        assert not any(isinstance(n, ast.NamedExpr) for n in ast.walk(tree)), path.name


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_no_module_holds_mutable_state(path: Path) -> None:
    """State lives in objects made by `serve.main`: no `global`, and what a module
    assigns at its top level is a constant (an upper-case name bound to a literal or an
    immutable value)."""
    tree = ast.parse(path.read_text())
    assert not any(isinstance(n, ast.Global | ast.Nonlocal) for n in ast.walk(tree)), path.name
    for node in tree.body:
        if not isinstance(node, ast.Assign | ast.AnnAssign):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            assert isinstance(target, ast.Name) and target.id.isupper(), ast.unparse(node)
        value = node.value
        assert not isinstance(value, ast.List | ast.Dict | ast.Set), ast.unparse(node)
        if isinstance(value, ast.Call):
            called = value.func.attr if isinstance(value.func, ast.Attribute) else None
            assert called in IMMUTABLE_CALLS, ast.unparse(node)


def test_the_loader_is_python_3_7_and_short() -> None:
    ast.parse(LOADER, feature_version=OLDEST_PYTHON)
    # short: it is the guest's command line (`ps`); tests find the guest by its name in it
    assert len(LOADER) < 1600 and "orsbox-guest" in LOADER


def test_modules_come_after_what_they_import() -> None:
    order = [name for name, _, _ in guest_modules()]
    assert order[0] == PACKAGE and len(order) == len(SOURCES)
    for position, (name, _, source) in enumerate(guest_modules()):
        for imported in guest.own_imports(name, source):
            assert order.index(imported) < position, (name, imported)


def test_the_payload_holds_code_and_source_and_its_digest() -> None:
    payload = guest_payload()
    data = payload.data
    code_len, source_len = int(data[:10]), int(data[10:20])
    assert len(data) == 20 + code_len + source_len
    assert data[20:24] == importlib.util.MAGIC_NUMBER
    entry, code = marshal.loads(data[24 : 20 + code_len])
    entry_again, sources = marshal.loads(data[20 + code_len :])
    assert entry == entry_again == guest.ENTRY
    assert [m[0] for m in code] == [m[0] for m in sources]
    assert payload.digest == guest.hashlib.sha256(data).hexdigest()


# Modules that cost the guest much memory to keep loaded (the package docstring), and the
# modules they would bring with them: none may be loaded by the package.
HEAVY = {"json", "re", "enum", "contextlib", "subprocess", "threading", "selectors",
         "collections", "signal", "functools", "locale", "warnings"}  # fmt: skip


def test_the_package_loads_no_heavy_module_and_compiling_leaves_nothing() -> None:
    """The package's modules run as the loader runs them, in a fresh `python3 -I -S`
    on this host, without `main` (which would serve, and end its "container" at EOF by
    signalling PID 1): what is loaded then is what every sandbox keeps. Compiled from
    the source (another python's bytecode), it keeps about what the compiled payload
    costs: the compiler ran in a child (python 3.11: 632 KiB over a bare interpreter,
    against 596; 1,964 when the guest compiled)."""
    kept_kib = {}
    load_only = LOADER.rsplit("\n", 1)[0]
    assert load_only.endswith("exec(x, m.__dict__)"), "the loader's last line calls main"
    report = (
        "\nprint(' '.join(sorted(sys.modules)))"
        "\nprint([l.split()[1] for l in open('/proc/self/status') if l.startswith('RssAnon')][0])"
    )
    for payload_part in ("compiled", "source"):
        data = guest_payload().data
        if payload_part == "source":  # another python's magic number: the source is compiled
            data = data[:20] + b"\0\0\0\0" + data[24:]
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-c", load_only + report],
            input=data, capture_output=True, timeout=60, check=True,
        )  # fmt: skip
        modules, rss_kib = done.stdout.decode().splitlines()
        loaded = set(modules.split())
        assert f"{PACKAGE}.serve" in loaded and f"{PACKAGE}.spawn" in loaded
        assert loaded & HEAVY == set(), (payload_part, rss_kib)
        kept_kib[payload_part] = int(rss_kib)
    assert kept_kib["source"] < kept_kib["compiled"] + 512, kept_kib


# -- on a real sandbox ---------------------------------------------------------------------


def sub_guests(sandbox: object) -> object:
    return sandbox._open_guest.__self__  # type: ignore[attr-defined]


def harmful_payload(marker: str) -> bytes:
    """A payload in the guest's format whose code, run, leaves `marker` behind."""
    code = compile(f"open({marker!r}, 'w').close()", "forged", "exec")
    compiled = importlib.util.MAGIC_NUMBER + marshal.dumps(("x", (("x", True, code),)))
    source = marshal.dumps(("x", ()))
    return b"%010d%010d" % (len(compiled), len(source)) + compiled + source


ENGINES = [pytest.param(name, marks=UNDER_TEST[name].marks) for name in ("runc", "runsc", "podman")]


@pytest.mark.anyio
@pytest.mark.parametrize("under_test", ENGINES, indirect=True)
async def test_sub_guests_load_the_kept_copy_and_refuse_a_changed_one(
    backend: SandboxBackend,
) -> None:
    """On every engine (runc, gVisor, Podman): the copy is kept in the sandbox's
    /dev/shm, and a sub-guest runs it only with the payload's digest."""
    sandbox = await backend.start(SandboxSpec(image=BASE_IMAGE, session_id="kept"))
    try:
        subs = sub_guests(sandbox)
        for _ in range(3):
            assert (await sandbox.exec(["id", "-un"], user="nobody")).output == "nobody\n"
        assert subs.payloads_sent == 0  # type: ignore[attr-defined]
        kept = subs._kept  # type: ignore[attr-defined]
        assert kept.path.startswith("/dev/shm/orsbox-guest-")
        listed = await sandbox.exec(["stat", "-c", "%a %s", kept.path], user="nobody")
        assert listed.output.split() == ["444", str(guest_payload().size)]
        # The sandbox's own user rewrites the copy: the next sub-guest must not run it.
        await sandbox.shell(f"chmod 644 {kept.path}")
        await sandbox.write_file(kept.path, harmful_payload("/tmp/forged-ran"))
        assert (await sandbox.exec(["id", "-un"], user="root")).output == "root\n"
        assert subs.payloads_sent == 1  # type: ignore[attr-defined]
        assert (await sandbox.shell("ls /tmp/forged-ran")).exit_code != 0
        # ... and the next one gets a fresh copy.
        assert (await sandbox.exec(["id", "-un"], user="nobody")).output == "nobody\n"
        assert subs.payloads_sent == 1 and subs._kept.path != kept.path  # type: ignore[attr-defined]
    finally:
        await sandbox.close()


@pytest.mark.anyio
@pytest.mark.parametrize("under_test", ENGINES, indirect=True)
async def test_a_python_of_another_bytecode_compiles_the_source(
    backend: SandboxBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sandbox's python runs the host's compiled code only under the same magic
    number; another one compiles the source (here: the magic altered in transit), in a
    child that is gone once the guest answers."""
    real = guest_payload()
    other_magic = real.data[:20] + b"\0\0\0\0" + real.data[24:]
    forged = Payload(other_magic, guest.hashlib.sha256(other_magic).hexdigest())
    monkeypatch.setattr("orsbox.sandbox.guest.start.guest_payload", lambda: forged)
    sandbox = await backend.start(SandboxSpec(image=BASE_IMAGE, session_id="magic"))
    try:
        assert (await sandbox.shell("echo ok")).output == "ok\n"
        assert (await sandbox.exec(["id", "-un"], user="nobody")).output == "nobody\n"
        # the main guest alone: no compiler left (a sub-guest, entered from outside with
        # parent 0, may still be on its way out after its exec's reply, and may end
        # between pgrep and the read of its stat: then it is not counted)
        loaders = await sandbox.exec(
            "for p in $(pgrep -f '^python3 -I -S -c import os, sys, marshal'); do"
            " parent=$(cut -d' ' -f4 /proc/$p/stat 2>/dev/null) && [ \"$parent\" != 0 ]"
            " && echo $p; done | wc -l"
        )
        assert loaders.output.strip() == "1"
    finally:
        await sandbox.close()


@pytest.mark.anyio
@pytest.mark.parametrize("under_test", ENGINES, indirect=True)
async def test_a_user_the_image_lacks_is_refused_with_the_engines_reason(
    backend: SandboxBackend,
) -> None:
    """The engine refuses to start the sub-guest and closes the exec's stream without
    reading the payload sent to it. The error says so at once, with the engine's reason
    (before, the pending hello waited out its 30 s timeout: "did not answer"), and the
    sandbox goes on. Docker 20.10 under load sometimes closes the refused exec's stream
    without its reason; the error then says what the sandbox's /etc/passwd shows."""
    sandbox = await backend.start(SandboxSpec(image=BASE_IMAGE, session_id="no-user"))
    try:
        with pytest.raises(SandboxError) as refused:
            await sandbox.exec(["id", "-un"], user="nobody-here")
        message = str(refused.value)
        assert "unable to find user nobody-here" in message, message  # the engine's reason
        assert (await sandbox.shell("echo ok")).output == "ok\n"
        assert (await sandbox.exec(["id", "-un"], user="nobody")).output == "nobody\n"
    finally:
        await sandbox.close()
