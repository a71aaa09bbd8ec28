"""How the Inspect provider reads a sandbox config: compose files as Inspect's Docker
provider writes them, and a clear refusal for what an orsbox sandbox cannot honour."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("inspect_ai", reason="pip install -e '.[inspect]'")

from orsbox.integrations.inspect.config import (
    ConfigRefused,
    OrsboxSandboxConfig,
    memory_bytes,
    resolve,
)


def compose(tmp_path: Path, text: str) -> str:
    path = tmp_path / "compose.yaml"
    path.write_text(text)
    return str(path)


def test_the_default_service_gives_image_limits_env_and_network(tmp_path: Path) -> None:
    config = resolve(
        compose(
            tmp_path,
            """
services:
  default:
    image: orsbox/swe:latest
    command: tail -f /dev/null
    init: true
    working_dir: /testbed
    environment: [A=1, B=two]
    network_mode: bridge
    cpus: 2
    mem_limit: 1.5g
""",
        )
    )
    assert config.image == "orsbox/swe:latest" and config.working_dir == "/testbed"
    assert config.env == {"A": "1", "B": "two"} and config.network is True
    assert config.cpus == 2.0 and config.memory_bytes == int(1.5 * 1024**3)


def test_a_build_section_names_the_dockerfile(tmp_path: Path) -> None:
    (tmp_path / "ctx").mkdir()
    text = "services:\n  default:\n    build:\n      context: ctx\n      dockerfile: Alt\n"
    config = resolve(compose(tmp_path, text))
    assert config.dockerfile == str((tmp_path / "ctx" / "Alt").resolve())


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("services:\n  a: {image: x}\n  b: {image: y}\n", "2 services"),
        ("services:\n  default: {image: x, ports: ['80:80']}\n", "ports"),
        ("services:\n  default: {image: x, privileged: true}\n", "privileged"),
        ("services:\n  default: {image: x, network_mode: host}\n", "network_mode 'host'"),
        ("services:\n  default: {image: x}\nvolumes: {data: {}}\n", "volumes"),
    ],
)
def test_what_cannot_be_honoured_is_refused_by_name(tmp_path: Path, text: str, named: str) -> None:
    with pytest.raises(ConfigRefused, match=named):
        resolve(compose(tmp_path, text))


def test_a_dockerfile_path_and_the_explicit_model() -> None:
    dockerfile = Path(__file__).parent / "Dockerfile.missing"
    with pytest.raises(ConfigRefused, match="no such sandbox config file"):
        resolve(str(dockerfile))
    explicit = OrsboxSandboxConfig(url="http://127.0.0.1:1", token="s3cr3t-tok", runtime="runsc")
    assert resolve(explicit) is explicit
    assert "s3cr3t-tok" not in repr(resolve(explicit.model_dump()))  # the token stays a secret
    assert hash(explicit) == hash(
        OrsboxSandboxConfig(url="http://127.0.0.1:1", token="t", runtime="runsc")
    )


@pytest.mark.parametrize(
    ("text", "size"), [("512m", 512 * 1024**2), ("2g", 2 * 1024**3), ("1GB", 1024**3), (100, 100)]
)
def test_memory_sizes_in_compose_notation(text: object, size: int) -> None:
    assert memory_bytes(text) == size
