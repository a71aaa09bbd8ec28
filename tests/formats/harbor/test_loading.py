"""Reading task folders, without Docker: every field read, what cannot be honoured
refused with task, field and reason, images chosen and tagged, rewards parsed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from orsbox.errors import BadRequest, ManifestError
from orsbox.formats import FormatOptions
from orsbox.formats.harbor import is_harbor_path, load
from orsbox.formats.harbor.environment import HarborEnvironment
from orsbox.formats.harbor.phases import PhaseNetwork, unmet_by
from orsbox.formats.harbor.pytest_summary import PytestVerifier, parse_pytest_summary
from orsbox.formats.harbor.reward_files import (
    HarborVerifier,
    RewardFileError,
    parse_reward_json,
    parse_reward_txt,
)
from orsbox.formats.harbor.task_config import TaskConfig, read_task_toml
from orsbox.sandbox.backend_config import DefaultLimits
from orsbox.sandbox.capabilities import EVERY_NETWORK_MODE
from orsbox.sandbox.fake import FAKE_CAPABILITIES
from orsbox.sandbox.image_map import ImageMap
from tests.formats.harbor.tasks import (
    CHECK_OUT,
    IMAGE_MAP,
    RUN_LABEL,
    harbor_task,
    write,
    write_tb1_task,
)
from tests.runtimes import GVISOR_CAPABILITIES

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "harbor"

# Every field of task.toml schema 1.4 that orsbox honours or accepts.
FULL_TOML = """
schema_version = "1.4"
source = "https://example.org/tasks"
artifacts = ["/app/out.txt", { source = "/logs/x", destination = "x", exclude = ["*.tmp"] }]

[task]
name = "org/full"
version = "1.0.0"
description = "every field"
authors = [{ name = "A", email = "a@example.org" }]
keywords = ["k"]

[metadata]
anything = { nested = [1, 2] }

[verifier]
timeout_sec = 30.0
env = { MODE = "${HARBOR_TEST_MODE:-strict}" }
user = "root"
environment_mode = "shared"

[agent]
timeout_sec = 120.0
user = 0

[environment]
build_timeout_sec = 100.0
os = "LINUX"
cpus = 2.0
memory_mb = 1024
storage_mb = 256
gpus = 0
workdir = "/app"
network_mode = "no-network"
env = { A = "1" }

[solution]
env = { B = "2" }
"""


def options(**kw: object) -> FormatOptions:
    return FormatOptions(image_map=ImageMap.parse([IMAGE_MAP]), **kw)  # type: ignore[arg-type]


def dataset_class(path: Path, **kw: object) -> type[HarborEnvironment]:
    (env_cls,) = load(path, options(**kw))
    assert issubclass(env_cls, HarborEnvironment)
    return env_cls


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("ORSBOX_ALLOW_NETWORK", raising=False)


def test_every_field_is_read_and_honoured(tmp_path: Path) -> None:
    folder = harbor_task(tmp_path / "full", CHECK_OUT)
    (folder / "task.toml").write_text(FULL_TOML)
    env_cls = dataset_class(folder)
    task = env_cls.tasks["full"]
    assert env_cls.list_tasks("test") == [{"name": "full", "format": "harbor"}]
    assert (task.limits.cpus, task.limits.memory_bytes) == (2.0, 1024 * 1024**2)
    # storage_mb bounds what the task writes; the root stays writable (Harbor's profile)
    assert task.limits.writable_layer_bytes == 256 * 1024**2 and task.limits.disk_bytes is None
    assert task.limits.privileges == "runtime-default" and task.limits.network is False
    # an operator's default disk bound would make the root read-only: it does not apply
    assert DefaultLimits(disk_bytes=2**30).apply(task.limits).disk_bytes is None
    assert (task.agent_user, task.workdir, task.env, task.agent_timeout_s) == (
        "0",
        "/app",
        {"A": "1"},
        120.0,
    )
    assert isinstance(task.verifier, HarborVerifier)  # chosen at load, for the format
    assert (task.verifier.user, task.verifier.timeout_s) == ("root", 30.0)
    assert task.verifier.env == {"MODE": "strict"}  # ${VAR:-default} from the host
    assert task.solution_env == {"B": "2"}
    assert task.image.recipe is not None and task.image.recipe.timeout_s == 100.0


def test_the_older_version_key_and_legacy_sizes(tmp_path: Path) -> None:
    path = tmp_path / "task.toml"
    path.write_text('version = "1.0"\n[environment]\nmemory = "2G"\nallow_internet = false\n')
    config = read_task_toml(path)
    assert config.schema_version == "1.0"
    assert config.environment.memory_mb == 2048
    assert config.environment.network_mode == "no-network"
    assert TaskConfig().verifier.timeout_sec == 600.0  # Harbor's defaults


def test_harbors_template_task_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORSBOX_ALLOW_NETWORK", "1")
    env_cls = dataset_class(FIXTURES / "template-task")
    task = env_cls.tasks["template-task"]
    assert task.verifier.timeout_s == 900.0 and task.agent_timeout_s == 900.0
    assert task.limits.network is True and env_cls.limits.network is True
    assert task.image.tag.startswith("orsbox-harbor/template-task:")


@pytest.mark.parametrize(
    ("environment", "sections", "field", "reason"),
    [
        ("gpus = 1", "", "environment.gpus", "no GPUs"),
        ('gpu_types = ["H100"]', "", "environment.gpu_types", "no GPUs"),
        (
            "",
            '[[environment.mcp_servers]]\nname = "m"\nurl = "http://x"',
            "environment.mcp_servers",
            "MCP",
        ),
        ('allowed_hosts = ["a.org"]', "", "environment.allowed_hosts", "applies only to"),
        (
            'network_mode = "allowlist"\nallowed_hosts = ["https://a.org/x"]',
            "",
            "environment.allowed_hosts",
            "not a host name",
        ),
        ("", '[[steps]]\nname = "one"', "steps", "multi-step"),
        ("", '[verifier]\nenvironment_mode = "separate"', "verifier.environment", "separate"),
        ("", '[environment.healthcheck]\ncommand = "true"', "environment.healthcheck", "readiness"),
        ('os = "windows"', "", "environment.os", "Linux"),
        ("", '[verifier]\nnetwork_mode = "public"', "verifier.network_mode", "ALLOW_NETWORK=1"),
        (
            "",
            '[verifier]\nnetwork_mode = "allowlist"\nallowed_hosts = ["a.org"]',
            "verifier.network_mode",
            "ORSBOX_ALLOW_NETWORK_ALLOWLIST=1",
        ),
        ("", '[environment.tpu]\ntype = "v6e"\ntopology = "2x2"', "environment.tpu", "TPU"),
    ],
)
def test_what_orsbox_cannot_honour_is_refused(
    tmp_path: Path, environment: str, sections: str, field: str, reason: str
) -> None:
    folder = harbor_task(tmp_path / "refused", CHECK_OUT)
    network = "" if "network_mode" in environment else 'network_mode = "no-network"'
    toml = f"[environment]\n{network}\n{environment}\n\n{sections}\n"
    (folder / "task.toml").write_text(toml)
    with pytest.raises(ManifestError) as raised:
        dataset_class(folder)
    message = str(raised.value)
    assert "task refused" in message and field in message and reason in message


def test_each_phase_gets_its_own_network(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Harbor 0.26: the environment's mode is the baseline, each phase may override it,
    and an allow-list phase allows its hosts and the environment's."""
    monkeypatch.setenv("ORSBOX_ALLOW_NETWORK_ALLOWLIST", "1")
    folder = harbor_task(tmp_path / "phased", CHECK_OUT)
    (folder / "task.toml").write_text(
        '[environment]\nnetwork_mode = "no-network"\nallowed_hosts = ["deb.debian.org"]\n'
        '[verifier]\nnetwork_mode = "allowlist"\nallowed_hosts = ["*.pypi.org"]\n'
    )
    env_cls = dataset_class(folder)
    task = env_cls.tasks["phased"]
    assert task.limits.network is False and task.limits.allowed_hosts == ()
    assert task.verifier_network == PhaseNetwork("allowlist", ("*.pypi.org", "deb.debian.org"))
    assert env_cls.limits.network == "allowlist"  # what the server's policy is asked for
    (folder / "task.toml").write_text('[environment]\nnetwork_mode = "no-network"\n')
    assert dataset_class(folder).tasks["phased"].verifier_network is None  # no switch


def test_a_task_that_wants_the_network_names_the_setting(tmp_path: Path) -> None:
    folder = harbor_task(tmp_path / "online", CHECK_OUT)
    toml = folder / "task.toml"
    toml.write_text(
        toml.read_text().replace('network_mode = "no-network"', 'network_mode = "public"')
    )
    with pytest.raises(ManifestError, match=r"task online: .*network_mode.*ORSBOX_ALLOW_NETWORK=1"):
        dataset_class(folder)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda f: (f / "instruction.md").unlink(), r"task bad: instruction.md is missing"),
        (lambda f: (f / "task.toml").write_text("[verifier\n"), r"task.toml: not valid TOML"),
        (
            lambda f: (f / "task.toml").write_text("[agent]\ntimeout = 5\n"),
            r"agent.timeout: unknown field",
        ),
        (
            lambda f: (f / "task.toml").write_text("[agent]\ntimeout_sec = 'soon'\n"),
            r"agent.timeout_sec: Input should be a valid number",
        ),
        (lambda f: (f / "tests" / "test.sh").unlink(), r"test.sh is missing"),
    ],
)
def test_bad_input_is_a_clear_load_error(tmp_path: Path, change: object, expected: str) -> None:
    folder = harbor_task(tmp_path / "bad", CHECK_OUT)
    change(folder)  # type: ignore[operator]
    with pytest.raises(ManifestError, match=expected):
        dataset_class(folder)


def test_a_dataset_serves_its_good_tasks_and_names_the_bad(tmp_path: Path) -> None:
    harbor_task(tmp_path / "b-good", CHECK_OUT)
    bad = harbor_task(tmp_path / "a-bad", CHECK_OUT)
    (bad / "task.toml").write_text("[agent]\nnope = 1\n")
    env_cls = dataset_class(tmp_path, name="mine", split="dev")
    assert env_cls.name() == "mine" and [s.name for s in env_cls.list_splits()] == ["dev"]
    assert list(env_cls.tasks) == ["b-good"]
    assert "agent.nope: unknown field" in env_cls.refused["a-bad"]


def test_tasks_are_sorted_by_name_and_detected_by_their_files(tmp_path: Path) -> None:
    for name in ("zeta", "alpha", "mid"):
        harbor_task(tmp_path / name, CHECK_OUT)
    (tmp_path / "not-a-task").mkdir()
    assert is_harbor_path(tmp_path) and not is_harbor_path(tmp_path / "not-a-task")
    assert [t["name"] for t in dataset_class(tmp_path).list_tasks("test")] == [
        "alpha",
        "mid",
        "zeta",
    ]


def test_dockerfile_is_mapped_without_touching_the_folder_and_edits_rebuild(tmp_path: Path) -> None:
    folder = harbor_task(tmp_path / "img", CHECK_OUT)
    before = dataset_class(folder).tasks["img"].image
    assert before.recipe is not None
    assert "FROM orsbox/debian:bookworm" in before.recipe.dockerfile.read_text()
    assert (folder / "environment" / "Dockerfile").read_text().startswith("FROM ubuntu:24.04")
    assert before.recipe.base_image == "orsbox/debian:bookworm"  # built first if missing
    (folder / "environment" / "data.txt").write_text("new")
    after = dataset_class(folder).tasks["img"].image
    assert after.tag != before.tag and after.tag.startswith("orsbox-harbor/img:")


def test_docker_image_is_used_as_given_after_the_map(tmp_path: Path) -> None:
    folder = harbor_task(tmp_path / "given", CHECK_OUT)
    toml = folder / "task.toml"
    toml.write_text(
        toml.read_text().replace(
            "[environment]\n", '[environment]\ndocker_image = "ubuntu:24.04"\n'
        )
    )
    image = dataset_class(folder).tasks["given"].image
    assert (image.tag, image.recipe) == ("orsbox/debian:bookworm", None)


def test_compose_main_service_and_more_than_one_refused(tmp_path: Path) -> None:
    folder = harbor_task(tmp_path / "composed", CHECK_OUT)
    compose = folder / "environment" / "docker-compose.yaml"
    compose.write_text("services:\n  main:\n    image: ubuntu:24.04\n")
    assert dataset_class(folder).tasks["composed"].image.tag == "orsbox/debian:bookworm"
    compose.write_text("services:\n  main:\n    build: .\n  db:\n    image: postgres\n")
    with pytest.raises(
        ManifestError, match=r"task composed: .*2 services \(main, db\).*single service"
    ):
        dataset_class(folder)


def test_terminal_bench_1_task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = write_tb1_task(tmp_path / "tb1")
    with pytest.raises(ManifestError, match="ORSBOX_ALLOW_NETWORK=1"):
        dataset_class(folder)
    monkeypatch.setenv("ORSBOX_ALLOW_NETWORK", "1")
    task = dataset_class(folder).tasks["tb1"]
    assert (task.kind, task.agent_timeout_s, task.verifier.timeout_s) == (
        "terminal-bench-1",
        300,
        120,
    )
    assert isinstance(task.verifier, PytestVerifier)  # chosen at load, for the format
    assert task.verifier.script == "/tests/run-tests.sh" and task.env == {"TEST_DIR": "/tests"}
    write(folder, {"task.yaml": "instruction: x\ndifficulty: easy\nparser: pytest\n"})
    with pytest.raises(ManifestError, match="parser: unknown field"):
        dataset_class(folder)
    write(folder, {"task.yaml": "instruction: x\ndifficulty: easy\nparser_name: swebench\n"})
    with pytest.raises(ManifestError, match="parser_name: 'swebench': only the pytest parser"):
        dataset_class(folder)


# -- rewards, read the way Harbor reads them -----------------------------------------------
def test_reward_json() -> None:
    several = parse_reward_json(b'{"reward": 0.25, "tests": 3, "style": 0.5}')
    assert several.reward == 0.25 and several.metadata["rewards"] == {
        "reward": 0.25,
        "tests": 3,
        "style": 0.5,
    }
    assert parse_reward_json(b'{"a": 1, "b": 0}').reward == 0.5  # no reward key: the mean
    for bad, why in [(b"", "empty"), (b"{", "not valid JSON"), (b'{"a": "1"}', "not a number"),
                     (b'{"a": NaN}', "not finite"), (b"[1]", "not a JSON object")]:  # fmt: skip
        with pytest.raises(RewardFileError, match=why):
            parse_reward_json(bad)


def test_reward_txt() -> None:
    assert parse_reward_txt(b" 0.5\n").reward == 0.5
    for bad, why in [(b"", "empty"), (b"yes", "not one number"), (b"inf", "not finite")]:
        with pytest.raises(RewardFileError, match=why):
            parse_reward_txt(bad)


def test_pytest_summary() -> None:
    output = "lots\n===== short test summary info =====\nPASSED t.py::a\nFAILED t.py::b - AssertionError: boom\nSKIPPED t.py::c\n"
    assert parse_pytest_summary(output) == {"a": "PASSED", "b": "FAILED", "c": "SKIPPED"}
    assert parse_pytest_summary("no summary here") is None


def test_the_image_map_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = harbor_task(tmp_path / "mapped", CHECK_OUT)
    monkeypatch.setenv("ORSBOX_IMAGE_MAP", "ubuntu:24.04=registry.example:5000/ubuntu:24.04")
    (env_cls,) = load(folder, FormatOptions(image_map=ImageMap.from_env()))
    recipe = env_cls.tasks["mapped"].image.recipe  # type: ignore[attr-defined]
    assert "FROM registry.example:5000/ubuntu:24.04" in recipe.dockerfile.read_text()
    assert recipe.base_image is None  # not one of orsbox's images: nothing to build first


def test_the_dockerfiles_user_is_read_and_nothing_is_added_to_the_image(tmp_path: Path) -> None:
    folder = harbor_task(tmp_path / "stored", CHECK_OUT)
    toml = folder / "task.toml"
    toml.write_text(toml.read_text().replace("[environment]\n", "[environment]\nstorage_mb = 64\n"))
    write(folder, {"environment/Dockerfile": "FROM ubuntu:24.04\nUSER nobody\n"})
    task = dataset_class(folder).tasks["stored"]
    assert task.image.recipe is not None
    text = task.image.recipe.dockerfile.read_text()
    assert text == f"FROM orsbox/debian:bookworm\nUSER nobody\n{RUN_LABEL}"  # nothing added
    assert task.image.default_user == "nobody"


def test_a_missing_docker_image_is_built_from_the_dockerfile_only_when_asked(
    tmp_path: Path,
) -> None:
    folder = harbor_task(tmp_path / "given", CHECK_OUT, extra='docker_image = "me/given:1"\n')
    task = dataset_class(folder).tasks["given"]
    assert (task.image.tag, task.image.recipe) == ("me/given:1", None)
    assert "--build-missing" in task.image.missing_hint
    assert "--image-map me/given:1=IMAGE" in task.image.missing_hint
    options = FormatOptions(image_map=ImageMap.parse([IMAGE_MAP]), build_missing=True)
    (env_cls,) = load(folder, options)
    recipe = env_cls.tasks["given"].image.recipe  # type: ignore[attr-defined]
    assert recipe is not None and recipe.tag == "me/given:1"  # built under its own name
    assert recipe.dockerfile.read_text().startswith("FROM orsbox/debian:bookworm")
    (folder / "environment" / "Dockerfile").unlink()  # nothing to build it from
    task = dataset_class(folder).tasks["given"]
    assert (
        "--build-missing" not in task.image.missing_hint
        and "--image-map" in task.image.missing_hint
    )


def test_a_task_spec_names_a_task_of_the_dataset(tmp_path: Path) -> None:
    env_cls = dataset_class(harbor_task(tmp_path / "only", CHECK_OUT))
    assert env_cls(task_spec={"name": "only"}).get_prompt()[0].text.startswith("Write")
    with pytest.raises(BadRequest, match="has no task named 'other'"):
        env_cls(task_spec={"name": "other"})


def test_the_check_table_lists_refused_tasks_and_failures(tmp_path: Path) -> None:
    from rich.console import Console

    from orsbox.authoring.grader import Grade
    from orsbox.cli.check import _table
    from orsbox.formats.harbor.oracle import TaskCheck

    harbor_task(tmp_path / "good", CHECK_OUT)
    (harbor_task(tmp_path / "bad", CHECK_OUT) / "task.toml").write_text("[environment]\ngpus = 2\n")
    env_cls = dataset_class(tmp_path)
    output = "collecting 2 items\nE   assert 'x' == 'y'\n\nFAILED t.py::test_y\n1 failed\n"
    checks = [
        TaskCheck("good", Grade(1.0, ""), Grade(1.0, ""), 2.5),
        TaskCheck("also", None, None, 0.1, "SetupFailed: its image did not build"),
        TaskCheck("wrong", Grade(0.0, ""), Grade(0.0, ""), 3.0, None, output),
    ]
    assert not checks[0].passed and TaskCheck("x", Grade(1.0, ""), Grade(0.0, ""), 1).passed
    console = Console(record=True, width=200)
    console.print(_table(env_cls, checks))
    text = console.export_text()
    assert "an untouched sandbox does not score 0.0" in text
    # the cause: the last lines of the solution's test output
    cause = (
        "the solution does not score 1.0: E   assert 'x' == 'y' | FAILED t.py::test_y | 1 failed"
    )
    assert cause in text
    assert "SetupFailed: its image did not build" in text
    assert "REFUSED task bad:" in text and "environment.gpus" in text


def test_a_task_the_backend_cannot_network_is_refused_before_it_starts() -> None:
    """What the server's backend cannot give is asked of it (`capabilities`) at setup:
    gVisor's sandboxes have no network and cannot switch one."""
    gvisor = GVISOR_CAPABILITIES
    runc = replace(gvisor, network_modes=EVERY_NETWORK_MODE, switch_network=True, runtime=None)
    allowlist = PhaseNetwork("allowlist", ("deb.debian.org",))
    assert unmet_by(False, None, gvisor) is None
    assert unmet_by(False, allowlist, runc) is None
    assert "cannot change their network while running" in (unmet_by(False, allowlist, gvisor) or "")
    assert "the agent phase asks for a network" in (unmet_by(True, None, gvisor) or "")
    assert unmet_by(True, allowlist, FAKE_CAPABILITIES) is None  # isolates nothing: not asked
