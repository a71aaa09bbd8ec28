"""Where the server gets the native sleeper (orsbox/sandbox/guest/sleeper/), first found
first: the one shipped prebuilt beside the source (setup.py's build of the wheel), if
its digest is this source's and it runs here; else a static executable built now with
musl-gcc; else none (guests then sleep as bash): no compiler, turned off, or the build
failed. scripts/test.sh installs musl-tools."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from orsbox.sandbox.guest import sleeper
from orsbox.sandbox.guest.sleeper import (
    CC_VARIABLE,
    DIGEST_NAME,
    SHIPPED_NAME,
    ship,
    sleeper_binary,
    source_digest,
)

PT_INTERP = 3  # a program header asking for a dynamic loader


@pytest.fixture(autouse=True)
def fresh_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Nothing shipped (an installed wheel's sleeper would be found first), no cache."""
    monkeypatch.setattr(sleeper, "SHIPPED", tmp_path)
    sleeper_binary.cache_clear()
    yield
    sleeper_binary.cache_clear()


def require_musl_gcc(monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("musl-gcc") is None:
        pytest.fail("musl-gcc is missing: scripts/test.sh installs musl-tools")
    monkeypatch.delenv(CC_VARIABLE, raising=False)


def no_build(cc: list[str]) -> bytes | None:
    raise AssertionError(f"built with {cc}: the shipped sleeper should have been used")


def built_now(cc: list[str]) -> bytes | None:
    return b"built now"


def program_header_types(elf: bytes) -> list[int]:
    """The p_type of each program header of a 64-bit little-endian ELF."""
    assert elf[:4] == b"\x7fELF" and elf[4] == 2 and elf[5] == 1, elf[:8]
    offset = int.from_bytes(elf[0x20:0x28], "little")
    size = int.from_bytes(elf[0x36:0x38], "little")
    count = int.from_bytes(elf[0x38:0x3A], "little")
    return [int.from_bytes(elf[offset + i * size :][:4], "little") for i in range(count)]


def test_musl_gcc_builds_a_static_sleeper(monkeypatch: pytest.MonkeyPatch) -> None:
    require_musl_gcc(monkeypatch)
    binary = sleeper_binary()
    assert binary is not None
    types = program_header_types(binary)
    assert types and PT_INTERP not in types  # runs in any image: no loader, no libc needed
    assert len(binary) < 200_000  # kept in a memfd per sandbox: its size is memory


def test_none_turns_the_sleeper_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CC_VARIABLE, "none")
    assert sleeper_binary() is None


def test_a_failed_build_means_no_sleeper_and_says_why(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(CC_VARIABLE, "false")  # a compiler that fails
    with caplog.at_level(logging.WARNING, logger=sleeper.__name__):
        assert sleeper_binary() is None
    assert "did not build" in caplog.text


def test_without_a_compiler_there_is_no_sleeper(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CC_VARIABLE, raising=False)
    monkeypatch.setattr(sleeper.shutil, "which", lambda name: None)
    assert sleeper_binary() is None


def test_the_shipped_sleeper_comes_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As in the server image: built with the wheel, no compiler where it runs."""
    require_musl_gcc(monkeypatch)
    assert ship(tmp_path)
    shipped = (tmp_path / SHIPPED_NAME).read_bytes()
    assert (tmp_path / DIGEST_NAME).read_text().strip() == source_digest()
    assert PT_INTERP not in program_header_types(shipped)
    monkeypatch.setattr(sleeper.shutil, "which", lambda name: None)
    monkeypatch.setattr(sleeper, "build", no_build)
    assert sleeper_binary() == shipped


def test_a_stale_shipped_sleeper_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """One built from another sleeper.c (an older wheel's, say) is built again now, or
    none is sent: never the old program."""
    require_musl_gcc(monkeypatch)
    assert ship(tmp_path)
    (tmp_path / DIGEST_NAME).write_text("0" * 64 + "\n")
    monkeypatch.setattr(sleeper, "build", built_now)
    with caplog.at_level(logging.WARNING, logger=sleeper.__name__):
        assert sleeper_binary() == b"built now"
    assert "stale" in caplog.text
    sleeper_binary.cache_clear()
    monkeypatch.setattr(sleeper.shutil, "which", lambda name: None)
    assert sleeper_binary() is None  # then the guests sleep as bash


@pytest.mark.parametrize("kind", ["dynamic", "does not run"])
def test_a_shipped_program_that_would_not_run_in_a_sandbox_is_not_used(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Its digest right, but dynamically linked (no loader in most images), or not an
    executable for this machine (here: a truncated one)."""
    require_musl_gcc(monkeypatch)
    assert ship(tmp_path)
    program = tmp_path / SHIPPED_NAME
    if kind == "dynamic":
        program.write_bytes(Path(shutil.which("true") or "/bin/true").read_bytes())
    else:
        program.write_bytes(program.read_bytes()[:4096])
    monkeypatch.setattr(sleeper, "build", built_now)
    with caplog.at_level(logging.WARNING, logger=sleeper.__name__):
        assert sleeper_binary() == b"built now"
    expected = "not a static executable" if kind == "dynamic" else "does not run"
    assert expected in caplog.text


def test_a_compiler_named_or_none_overrides_the_shipped_sleeper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ORSBOX_SLEEPER_CC names the compiler for another architecture's engine, for which
    the shipped (this machine's) program is wrong; `none` sends no sleeper at all."""
    require_musl_gcc(monkeypatch)
    assert ship(tmp_path)
    monkeypatch.setenv(CC_VARIABLE, "musl-gcc")
    monkeypatch.setattr(sleeper, "build", built_now)
    assert sleeper_binary() == b"built now"
    sleeper_binary.cache_clear()
    monkeypatch.setenv(CC_VARIABLE, "none")
    assert sleeper_binary() is None


def test_shipping_without_a_compiler_leaves_no_older_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wheel built again without musl-gcc in a build folder that held a sleeper ships
    none, not the old one."""
    for name in (SHIPPED_NAME, DIGEST_NAME):
        (tmp_path / name).write_bytes(b"old")
    monkeypatch.delenv(CC_VARIABLE, raising=False)
    monkeypatch.setattr(sleeper.shutil, "which", lambda name: None)
    assert not ship(tmp_path)
    assert list(tmp_path.iterdir()) == []
