"""deploy/: the Kubernetes manifests pass a schema check (no cluster needed), and the
shipped HAProxy configurations are exactly what `orsbox.cluster.router` writes and what
`haproxy -c` accepts (the same template the local cluster tests run for real)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from orsbox.cluster import images, router
from orsbox.server.access import OPEN_PATHS

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"


def test_kubernetes_manifests_pass_the_schema_check() -> None:
    documents = list(yaml.safe_load_all((DEPLOY / "kubernetes" / "orsbox.yaml").read_text()))
    kinds = [d["kind"] for d in documents]
    assert {"StatefulSet", "Deployment", "Service", "Secret"} <= set(kinds)
    for document in documents:
        kubernetes_validate.validate(document, kubernetes_validate.latest_version(), strict=True)
    cells = next(d for d in documents if d["kind"] == "StatefulSet")
    headless = next(d for d in documents if d["metadata"]["name"] == "orsbox-cells")
    assert (
        cells["spec"]["serviceName"] == "orsbox-cells" and headless["spec"]["clusterIP"] == "None"
    )
    for container in cells["spec"]["template"]["spec"]["containers"]:
        assert container["resources"]["requests"], container["name"]


def test_a_broken_manifest_fails_the_check() -> None:
    bad = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "x"},
           "spec": {"replicas": "three"}}  # fmt: skip
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, kubernetes_validate.latest_version(), strict=True)


@pytest.mark.parametrize(
    ("folder", "render"),
    [("kubernetes", router.kubernetes_config), ("compose", router.compose_config)],
)
def test_shipped_router_configs_are_current_and_valid(
    folder: str, render: object, tmp_path: Path
) -> None:
    shipped = DEPLOY / folder
    assert (shipped / "haproxy.cfg").read_text() == render(), (  # type: ignore[operator]
        f"regenerate: python -m orsbox.cluster.router {folder} deploy/{folder}"
    )
    router.write_errors(tmp_path)
    for name in ("cell-gone.http", "no-cell.http"):
        assert (shipped / name).read_text() == (tmp_path / name).read_text()
    if shutil.which("haproxy") is None:
        pytest.fail("haproxy is missing (scripts/test.sh installs it from Debian)")
    config = (
        (shipped / "haproxy.cfg").read_text().replace(str(router.SHIPPED_ERRORS_DIR), str(shipped))
    )
    (tmp_path / "haproxy.cfg").write_text(config)
    check = subprocess.run(
        ["haproxy", "-c", "-f", str(tmp_path / "haproxy.cfg")], capture_output=True
    )
    assert check.returncode == 0, check.stderr.decode()


def test_compose_cells_are_the_routers_servers() -> None:
    stack = yaml.safe_load((DEPLOY / "compose" / "compose.yaml").read_text())
    cells = sorted(s["hostname"] for s in stack["services"].values() if "hostname" in s)
    config = (DEPLOY / "compose" / "haproxy.cfg").read_text()
    servers = {
        line.split()[1] for line in config.splitlines() if line.strip().startswith("server ")
    }
    assert cells == ["cell-1", "cell-2", "cell-3"] and servers == set(cells)


def test_kubernetes_and_compose_run_the_same_images_health_and_token() -> None:
    """One deployment in two forms: the server and router images `orsbox build --server`
    makes, the router's config where its image reads it, `/health` on the cells' port,
    and the token from a secret the operator sets (a Secret, a required variable)."""
    documents = list(yaml.safe_load_all((DEPLOY / "kubernetes" / "orsbox.yaml").read_text()))
    named = {(d["kind"], d["metadata"]["name"]): d for d in documents}
    cell_pod = named[("StatefulSet", "orsbox")]["spec"]["template"]["spec"]
    cell = next(c for c in cell_pod["containers"] if c["name"] == "orsbox")
    router_pod = named[("Deployment", "orsbox-router")]["spec"]["template"]["spec"]
    (router_container,) = router_pod["containers"]
    stack = yaml.safe_load((DEPLOY / "compose" / "compose.yaml").read_text())["services"]

    assert cell["image"] == stack["cell-1"]["image"] == images.SERVER_IMAGE
    assert router_container["image"] == stack["router"]["image"] == images.ROUTER_IMAGE
    config_dir = str(router.SHIPPED_ERRORS_DIR)
    assert router_container["volumeMounts"][0]["mountPath"] == config_dir
    assert stack["router"]["volumes"] == [f"./:{config_dir}:ro"]

    assert "/health" in OPEN_PATHS  # answers without the token, as probes need
    port = cell["ports"][0]["containerPort"]
    for probe in (cell["readinessProbe"], cell["livenessProbe"]):
        assert probe["httpGet"] == {"path": "/health", "port": "http"}
    assert f"http://127.0.0.1:{port}/health" in " ".join(stack["cell-1"]["healthcheck"]["test"])

    secret = next(d for d in documents if d["kind"] == "Secret")
    token = next(e for e in cell["env"] if e["name"] == "ORSBOX_TOKEN")
    reference = token["valueFrom"]["secretKeyRef"]
    assert (
        reference["name"] == secret["metadata"]["name"] and reference["key"] in secret["stringData"]
    )
    for name in ("cell-1", "cell-2", "cell-3"):
        assert stack[name]["environment"]["ORSBOX_TOKEN"].startswith("${ORSBOX_TOKEN:?")


def test_kubernetes_and_compose_name_the_registry_the_engines_pull_through() -> None:
    """The registry image `orsbox build --server` makes, in both forms; in Kubernetes
    each cell's engine names the registry's Service as its mirror (and, plain HTTP
    inside the cluster, as insecure); in Compose it listens on loopback, which engines
    take over plain HTTP unasked."""
    documents = list(yaml.safe_load_all((DEPLOY / "kubernetes" / "orsbox.yaml").read_text()))
    named = {(d["kind"], d["metadata"]["name"]): d for d in documents}
    registry_pod = named[("Deployment", "orsbox-registry")]["spec"]["template"]["spec"]
    (registry,) = registry_pod["containers"]
    service = named[("Service", "orsbox-registry")]
    port = service["spec"]["ports"][0]["port"]
    address = f"orsbox-registry.orsbox.svc.cluster.local:{port}"
    cell_pod = named[("StatefulSet", "orsbox")]["spec"]["template"]["spec"]
    dind = next(c for c in cell_pod["containers"] if c["name"] == "dind")
    assert f"--registry-mirror=http://{address}" in dind["args"]
    assert f"--insecure-registry={address}" in dind["args"]
    assert registry["volumeMounts"][0]["mountPath"] == "/var/lib/docker-registry"

    stack = yaml.safe_load((DEPLOY / "compose" / "compose.yaml").read_text())["services"]
    assert registry["image"] == stack["registry"]["image"] == images.REGISTRY_IMAGE
    assert stack["registry"]["profiles"] == ["registry"]  # `up` alone runs none
    assert stack["registry"]["ports"][0].startswith("${ORSBOX_REGISTRY_PORT:-127.0.0.1:")
    assert (images.REGISTRY_FOLDER / "Dockerfile").is_file()
