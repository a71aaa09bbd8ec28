"""Backend configuration (`orsbox.sandbox.config`): the union held by Settings, where it
comes from (environment, file, CLI flags), engine addresses checked at startup, and the
operator's say over runtimes environments ask for."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from orsbox.cli.backend_options import with_backend
from orsbox.errors import SandboxError, SandboxStartError
from orsbox.sandbox import SandboxLimits, SandboxSpec, create_backend
from orsbox.sandbox.config import configured, load_config_file, parse_config, with_options
from orsbox.sandbox.docker.config import DockerConfig, engine_address, is_gvisor
from orsbox.sandbox.docker.options import address_space_bound
from orsbox.sandbox.fake import FakeBackend, FakeConfig
from orsbox.settings import Settings
from tests.skeleton_backend import SkeletonConfig
from tests.skeleton_backend.backend import SkeletonBackend
from tests.skeleton_backend.sandbox import SkeletonSandbox
from tests.test_access import refusal

ROOT = Path(__file__).resolve().parent.parent


def test_settings_take_the_backend_as_json_with_or_without_its_type(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ORSBOX_BACKEND", '{"runtime": "runsc", "allow_runtimes": ["kata"]}')
    assert Settings().backend == DockerConfig(runtime="runsc", allow_runtimes=["kata"])
    monkeypatch.setenv("ORSBOX_BACKEND", '{"type": "fake"}')
    assert Settings().backend == FakeConfig()
    monkeypatch.setenv("ORSBOX_BACKEND", '{"type": "docker", "runtme": "runsc"}')
    with pytest.raises(ValueError, match="runtme"):
        Settings()


def test_a_backend_file_toml_or_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    toml = tmp_path / "orsbox.toml"
    toml.write_text('[backend]\ntype = "docker"\nruntime = "runsc"\n')
    assert load_config_file(toml) == DockerConfig(runtime="runsc")
    json_file = tmp_path / "backend.json"
    json_file.write_text('{"type": "fake"}')
    monkeypatch.setenv("ORSBOX_BACKEND_FILE", str(json_file))
    assert Settings().backend == FakeConfig()


def test_what_runs_without_the_servers_settings_reads_the_backend_as_they_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`configured()`, the harness integrations' backend, is `Settings().backend`."""
    monkeypatch.delenv("ORSBOX_BACKEND", raising=False)
    monkeypatch.delenv("ORSBOX_BACKEND_FILE", raising=False)
    assert configured() == Settings().backend == DockerConfig()
    monkeypatch.setenv("ORSBOX_BACKEND", '{"runtime": "runsc", "image_map": ["a=b"]}')
    assert configured() == Settings().backend == DockerConfig(runtime="runsc", image_map=["a=b"])
    json_file = tmp_path / "backend.json"
    json_file.write_text('{"type": "fake", "allow_runtimes": ["runsc"]}')
    monkeypatch.setenv("ORSBOX_BACKEND_FILE", str(json_file))  # the file wins
    assert configured() == Settings().backend == FakeConfig(allow_runtimes=["runsc"])


def test_cli_flags_lay_over_the_config() -> None:
    settings = Settings(backend=DockerConfig(allow_runtimes=["runsc"]))
    flagged = with_backend(settings, {"runtime": "runsc", "engine": "unix:///other.sock"})
    assert flagged.backend == DockerConfig(
        runtime="runsc", engine="unix:///other.sock", allow_runtimes=["runsc"]
    )
    assert with_backend(settings, {"runtime": None, "engine": None}) is settings


def test_an_option_the_selected_backend_lacks_is_refused() -> None:
    """Options are the selected backend's fields: the fake has no engine to point at."""
    with pytest.raises(SandboxError, match="the fake backend has no option engine"):
        with_options(FakeConfig(), engine="unix:///other.sock")
    assert with_options(None, runtime="runsc") == DockerConfig(runtime="runsc")


def test_a_former_privileges_name_is_still_accepted() -> None:
    assert SandboxLimits(privileges="docker-default").privileges == "runtime-default"


@pytest.mark.parametrize(
    ("address", "refused"),
    [
        ("unix:///var/run/docker.sock", None),
        ("tcp://127.0.0.1:2375", None),
        ("tcp://localhost:2375", None),
        ("tcp://10.0.0.5:2375", "loopback"),
        ("https://10.0.0.5:2376", "TLS"),
        ("ssh://user@host", "ssh -NL"),
        ("gopher://x", "unknown scheme"),
    ],
)
def test_engine_addresses_work_or_are_refused_with_a_reason(
    address: str, refused: str | None
) -> None:
    config = DockerConfig(engine=address)
    if refused is None:
        assert engine_address(config) == address
        return
    with pytest.raises(SandboxError, match=refused):
        engine_address(config)
    with pytest.raises(SandboxError, match=refused):  # at startup, not at the first session
        create_backend(config)


def test_tls_from_the_environment_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_TLS_VERIFY", "1")
    with pytest.raises(SandboxError, match="TLS"):
        engine_address(DockerConfig(engine="tcp://127.0.0.1:2376"))


def test_create_backend_chooses_by_type() -> None:
    assert isinstance(create_backend(FakeConfig()), FakeBackend)


def test_runtimes_environments_ask_for_need_the_operator() -> None:
    asks = SandboxLimits(runtime="runsc")
    assert "the runsc runtime" in (refusal(asks) or "")
    assert "allow_runtimes" in (refusal(asks) or "")
    assert refusal(asks, Settings(backend=DockerConfig(runtime="runsc"))) is None
    assert refusal(asks, Settings(backend=DockerConfig(allow_runtimes=["runsc"]))) is None
    kata = Settings(backend=DockerConfig(allow_runtimes=["kata"]))
    hint = """ORSBOX_BACKEND='{"type": "docker", "allow_runtimes": ["kata", "runsc"]}'"""
    assert hint in (refusal(asks, kata) or "")


def test_a_backend_without_a_choice_of_runtime_refuses_them() -> None:
    """The policy asks the backend (`capabilities`), not the config's type: the fake runs
    host processes, under no runtime of its choosing."""
    asks = SandboxLimits(runtime="runsc")
    fake = Settings(backend=FakeConfig())
    assert "a docker backend (ORSBOX_BACKEND)" in (refusal(asks, fake) or "")


def test_under_gvisor_the_pids_limit_moves_inside_the_sandbox() -> None:
    from orsbox.sandbox import SandboxSpec
    from orsbox.sandbox.docker.options import container_options

    spec = SandboxSpec(image="img", limits=SandboxLimits(pids=64))
    runc = container_options(spec, "n", {}, {})
    assert runc["pids_limit"] == 64 and "runtime" not in runc and "ulimits" not in runc
    runsc = container_options(spec, "n", {}, {}, runtime="runsc")
    assert runsc["runtime"] == "runsc" and runsc["pids_limit"] == 16 * 64 + 512
    [nproc] = runsc["ulimits"]
    assert (nproc["Name"], nproc["Soft"], nproc["Hard"]) == ("nproc", 64, 64)


def test_an_image_map_rule_must_be_from_to() -> None:
    assert DockerConfig(image_map=["ubuntu:24.04=orsbox/base:latest"]).image_map
    with pytest.raises(ValueError, match="not FROM=TO"):
        DockerConfig(image_map=["ubuntu"])


def test_default_limits_fill_only_what_the_environment_left_unset() -> None:
    config = Settings(backend={"default_limits": {"memory_bytes": 2 * 1024**3, "cpus": 2}}).backend
    assert isinstance(config, DockerConfig)
    unset = config.default_limits.apply(SandboxLimits())
    assert (unset.memory_bytes, unset.cpus, unset.pids) == (2 * 1024**3, 2.0, 512)
    chosen = config.default_limits.apply(SandboxLimits(cpus=0.5, memory_bytes=256 * 1024**2))
    assert (chosen.memory_bytes, chosen.cpus) == (256 * 1024**2, 0.5)
    with pytest.raises(ValueError, match="greater than 0"):
        DockerConfig(default_limits={"cpus": 0})


def test_runsc_and_its_variants_are_gvisor() -> None:
    """`runsc-ptrace` (the same binary on another platform, scripts/start-runsc-engine.sh)
    gets gVisor's handling: the guest's memory bound as RLIMIT_AS, the pids bound inside."""
    limits = SandboxLimits(memory_bytes=512 * 1024 * 1024)
    for runtime in ("runsc", "runsc-ptrace"):
        assert is_gvisor(runtime)
        assert address_space_bound(limits, runtime) == limits.memory_bytes
    for runtime in (None, "runc", "runscx", "kata"):
        assert not is_gvisor(runtime)
        assert address_space_bound(limits, runtime) is None


# -- a new backend joins by one entry of the factory's list -------------------------------
REGISTER_SKELETON = (
    "import orsbox.sandbox.config as factory\n"
    "from tests.skeleton_backend import SkeletonConfig\n"
    "factory.BACKENDS = (*factory.BACKENDS, SkeletonConfig)\n"
    "from orsbox.cli.main import app\n"
    "app()\n"
)


@pytest.fixture
def skeleton(monkeypatch: pytest.MonkeyPatch) -> type[SkeletonConfig]:
    """The skeleton backend (tests/skeleton_backend/) listed by the factory: the one
    change to orsbox a new backend makes."""
    from orsbox.sandbox import config as factory

    monkeypatch.setattr(factory, "BACKENDS", (*factory.BACKENDS, SkeletonConfig))
    return SkeletonConfig


def skeleton_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`orsbox ARGS` with the skeleton listed and selected (ORSBOX_BACKEND)."""
    env = {**os.environ, "COLUMNS": "200", "ORSBOX_BACKEND": '{"type": "skeleton"}'}
    return subprocess.run(
        [sys.executable, "-c", REGISTER_SKELETON, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_listed_backend_is_selected_by_its_type_and_made_by_the_factory(
    skeleton: type[SkeletonConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORSBOX_BACKEND", '{"type": "skeleton", "namespace": "rl"}')
    config = Settings().backend
    assert config == SkeletonConfig(namespace="rl")
    backend = create_backend(config)
    assert isinstance(backend, SkeletonBackend) and backend.config is config
    assert not backend.capabilities.runtime_choice
    flagged = with_backend(Settings(), {"namespace": "eval", "runtime_class": "gvisor"})
    assert flagged.backend == SkeletonConfig(namespace="eval", runtime_class="gvisor")
    assert create_backend(flagged.backend).capabilities.runtime == "gvisor"


def test_the_cli_offers_the_selected_backends_flags() -> None:
    for command in ("serve", "run"):
        done = skeleton_cli(command, "--help")
        assert done.returncode == 0, done.stderr
        assert "--namespace" in done.stdout and "--runtime-class" in done.stdout
        assert "--engine" not in done.stdout and "--runtime " not in done.stdout


def test_doctor_asks_the_selected_backend() -> None:
    done = skeleton_cli("doctor")
    assert done.returncode == 1
    assert "FAIL Skeleton cluster: no cluster answers for namespace orsbox" in done.stdout
    assert "fix: point KUBECONFIG at a cluster" in done.stdout
    assert "ok   egress guard: not needed" in done.stdout
    assert "Docker" not in done.stdout and "squid" not in done.stdout, done.stdout


# -- the operator's options reach any backend ------------------------------------------
ASKED: list[SandboxSpec] = []  # what the recording skeleton was asked to start


class RecordingSkeleton(SkeletonBackend):
    """The skeleton with a start that keeps the spec it was asked for (what it would
    make a pod of) and starts nothing: a backend that reads no operator option."""

    async def start(self, spec: SandboxSpec) -> SkeletonSandbox:
        ASKED.append(spec)
        raise SandboxStartError("no cluster to start a pod on")


class RecordingSkeletonConfig(SkeletonConfig):
    def create(
        self, *, server_id: str | None = None, start_concurrency: int | None = None
    ) -> RecordingSkeleton:
        return RecordingSkeleton(self, server_id)


def test_the_operators_options_reach_a_backend_that_reads_none_of_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A skeleton-like backend, listed by the factory and selected by ORSBOX_BACKEND,
    takes every operator option; the factory applies the image map and the default
    limits to what it is asked to start, and the runtimes allowed are offered: the
    server's policy admits an environment asking for one, and its hint for another is
    a config this backend takes."""
    from orsbox.sandbox import config as factory

    monkeypatch.setattr(factory, "BACKENDS", (*factory.BACKENDS, RecordingSkeletonConfig))
    options = {
        "type": "skeleton",
        "runtime_class": "gvisor",
        "allow_runtimes": ["runsc"],
        "image_map": ["ubuntu:24.04=orsbox/debian:bookworm"],
        "default_limits": {"memory_bytes": 2 * 1024**3, "cpus": 2},
        "guest_sleep_after_s": 30,
        "egress_allow": ["10.1.2.0/24"],
    }
    monkeypatch.setenv("ORSBOX_BACKEND", json.dumps(options))
    settings = Settings()
    assert settings.backend.guest_sleep_after_s == 30
    assert settings.backend.egress_allow == ["10.1.2.0/24"]
    backend = create_backend(settings.backend)
    ASKED.clear()
    own = SandboxLimits(cpus=0.5, runtime="runsc")
    for spec in (SandboxSpec(image="ubuntu:24.04"), SandboxSpec(image="python:3.11", limits=own)):
        with pytest.raises(SandboxStartError, match="no cluster"):
            anyio.run(backend.start, spec)
    mapped, chosen = ASKED
    assert mapped.image == "orsbox/debian:bookworm"
    limits = mapped.limits
    assert (limits.memory_bytes, limits.cpus, limits.pids) == (2 * 1024**3, 2.0, 512)
    assert chosen.image == "python:3.11"
    limits = chosen.limits
    assert (limits.memory_bytes, limits.cpus, limits.runtime) == (2 * 1024**3, 0.5, "runsc")

    assert backend.capabilities.runtime == "gvisor"
    assert backend.capabilities.offers_runtime("runsc")
    assert refusal(SandboxLimits(runtime="runsc"), settings) is None
    refused = refusal(SandboxLimits(runtime="kata"), settings) or ""
    hint = """ORSBOX_BACKEND='{"type": "skeleton", "allow_runtimes": ["runsc", "kata"]}'"""
    assert hint in refused
    assert parse_config(json.loads(hint.split("'")[1])).allow_runtimes == ["runsc", "kata"]


def test_without_options_the_factory_adds_nothing(skeleton: type[SkeletonConfig]) -> None:
    assert type(create_backend(SkeletonConfig())) is SkeletonBackend
    assert type(create_backend(FakeConfig())) is FakeBackend


# -- the file count: four files of its own and the factory's line --------------------------
SKELETON_ROOT = ROOT / "tests" / "skeleton_backend"
PROOFS = ("tests/test_backend_config.py", "tests/test_layering.py")  # the skeleton's only readers
SKELETON_UNDER_TEST = '''"""The skeleton's conformance declaration, as tests/under_test/kubernetes.py would be."""
from tests.runtimes import BackendUnderTest
from tests.skeleton_backend import SkeletonConfig


class PodOutside:
    """kubectl delete pod --force, kubectl exec ps, ... (not written)."""


UNDER_TEST = {
    "skeleton": BackendUnderTest(
        "skeleton", "Skeleton cluster", lambda: SkeletonConfig().create(), {},
        PodOutside(), backend="skeleton", fixtures=(), marks=(),
    ),
}
'''


def test_the_skeleton_is_the_files_the_docs_count() -> None:
    """docs/backends.md's file count lists one file per file of the skeleton, which is
    what a new backend adds; no test but the proofs names it, so nothing else needed
    registering (the layering test finds its home from the factory's line, the suite
    takes it from a module of its own: the tests below and in tests/test_layering.py)."""
    files = sorted(path.name for path in SKELETON_ROOT.glob("*.py"))
    assert files == ["__init__.py", "backend.py", "images.py", "sandbox.py"]
    page = (ROOT / "docs" / "backends.md").read_text()
    section = page.split("### The file count", 1)[1].split("The trace, part by part", 1)[0]
    assert section.lstrip().startswith("Four new files and one line")
    assert sorted(set(re.findall(r"`orsbox/sandbox/kubernetes/(\w+\.py)`", section))) == files
    readers = {
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests").rglob("*.py")
        if "tests.skeleton_backend" in path.read_text() and SKELETON_ROOT not in path.parents
    }
    assert readers == set(PROOFS), readers


def test_every_backend_the_factory_lists_is_under_test() -> None:
    """CI's conformance suite runs on each backend the factory lists: a backend without
    a module of its own in tests/under_test/ fails here, naming where to declare it."""
    from orsbox.sandbox.config import BACKENDS
    from tests.under_test import UNDER_TEST

    declared = {entry.backend for entry in UNDER_TEST.values()}
    missing = sorted(config.tag() for config in BACKENDS if config.tag() not in declared)
    assert not missing, f"not under test: {missing} (add tests/under_test/<backend>.py)"


def test_a_backend_joins_the_conformance_suite_by_a_module_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The skeleton's declaration, put beside tests/under_test/'s modules (here from a
    temporary folder on the package's path), is collected with theirs."""
    import tests.under_test as under_test

    (tmp_path / "skeleton.py").write_text(SKELETON_UNDER_TEST)
    monkeypatch.setattr(under_test, "__path__", [*under_test.__path__, str(tmp_path)])
    monkeypatch.delitem(sys.modules, "tests.under_test.skeleton", raising=False)
    try:
        found = under_test.collect(under_test.__name__, under_test.__path__)
    finally:
        sys.modules.pop("tests.under_test.skeleton", None)
    assert set(found) == {*under_test.UNDER_TEST, "skeleton"}
    assert found["skeleton"].backend == "skeleton" and not found["skeleton"].differences
