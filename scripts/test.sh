#!/usr/bin/env bash
# The project's test command (the README's, and what CI runs): installs what the tests
# need on a fresh Debian 12 machine, starts a Docker engine, builds every sandbox image
# (orsbox/base, orsbox/swe and the bundled environments' own, through `orsbox build`),
# then runs ruff, mypy and the whole pytest suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

python3 -m pip install --quiet --disable-pip-version-check -e '.[test,inspect,docs]'
# TRL's ORS adapter (tests/integrations/test_trl_adapter.py) imports neither torch nor
# transformers, and what it does import (openreward, datasets) the test extra has: TRL
# alone takes seconds where its dependencies (torch, transformers, accelerate) took
# minutes. The GRPOTrainer smoke that needs them runs under `-m trl` (docs/train-with-trl.md).
python3 -m pip install --quiet --disable-pip-version-check --no-deps trl==1.16.0
export ORSBOX_REQUIRE_TRL=1
bash scripts/start-docker.sh
# The status page test drives a real headless browser (tests/monitoring/test_status_page.py)
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
fi
# The cluster tests' router (tests/cluster, docs/cluster.md): HAProxy from Debian
# and iproute2 (`ip`: each cell's private engine gets a bridge of its own)
if ! command -v haproxy >/dev/null 2>&1 || ! command -v ip >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy iproute2 >/dev/null
fi
# The two-engine pull test's registry, served on loopback (tests/registry.py)
if ! command -v docker-registry >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-registry >/dev/null
fi
# Allow-listed networks' egress proxy (orsbox.sandbox.docker.proxy, docs/network.md):
# squid from Debian, run by orsbox per sandbox; the package's own service is not wanted.
if ! command -v squid >/dev/null 2>&1 && [ ! -x /usr/sbin/squid ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends squid iptables >/dev/null
    (systemctl disable --now squid || service squid stop) >/dev/null 2>&1 || true
fi
bash scripts/build-images.sh
# The deployment (tests/deploy, README "Running the server in Docker"): the server and
# router images, built without network inside the build, and Debian's docker-compose
# 1.29, which brings deploy/compose up
if ! command -v docker-compose >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose >/dev/null
fi
python3 -m orsbox.cli.main build --server
# Harbor 0.26 itself (Python >= 3.12, from pyenv) for the Harbor environment's parity
# tests (tests/integrations/test_harbor_environment.py), with this checkout's orsbox
HARBOR_VENV="${ORSBOX_HARBOR_VENV:-/opt/orsbox-harbor-venv}"
if [ ! -x "$HARBOR_VENV/bin/harbor" ]; then
    "${PYENV_ROOT:-$HOME/.pyenv}/versions/3.12.1/bin/python" -m venv "$HARBOR_VENV"
    "$HARBOR_VENV/bin/pip" install --quiet --disable-pip-version-check harbor==0.26.0
fi
"$HARBOR_VENV/bin/pip" install --quiet --disable-pip-version-check -e .
export ORSBOX_HARBOR_VENV="$HARBOR_VENV" ORSBOX_REQUIRE_HARBOR=1
ruff check .
ruff format --check orsbox tests docs/hooks
# Types: mypy over orsbox/ as [tool.mypy] in pyproject.toml says (its cache in
# .mypy_cache): about 30 s cold on 2 idle cores (26 s of CPU), 3 s from the cache
python3 -m mypy
# CI owns its Docker engine, so the tests that stop and restart it run here
export ORSBOX_DISRUPTIVE_TESTS="${ORSBOX_DISRUPTIVE_TESTS:-1}"
# gVisor: a second, private engine with runsc for the runsc half of the conformance and
# adversarial tests (tests/runtimes.py); they fail rather than skip when it is missing.
# It is stopped when the tests end; the main engine is never touched.
bash scripts/start-runsc-engine.sh
stop_runsc_engine() {
    local pid
    pid="$(cat "${ORSBOX_RUNSC_PIDFILE:-/tmp/orsbox-runsc-dockerd.pid}" 2>/dev/null || true)"
    if [ -n "$pid" ] && kill "$pid" 2>/dev/null; then
        while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
    fi
    ip link del "${ORSBOX_RUNSC_BRIDGE:-orsbox-gvisor}" 2>/dev/null || true
}
trap stop_runsc_engine EXIT
export ORSBOX_REQUIRE_RUNSC="${ORSBOX_REQUIRE_RUNSC:-1}"
# Podman: its Docker-compatible API as a second real engine for the conformance suite
# (tests/runtimes.py); the tests fail rather than skip when it is missing. Stopped when
# the tests end, with the runsc engine.
bash scripts/start-podman-engine.sh >/dev/null
stop_podman_engine() {
    local pid
    pid="$(cat "${ORSBOX_PODMAN_PIDFILE:-/tmp/orsbox-podman-service.pid}" 2>/dev/null || true)"
    if [ -n "$pid" ] && kill "$pid" 2>/dev/null; then
        while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
    fi
    # its storage driver's own bind mount outlives the service
    umount "${ORSBOX_PODMAN_ROOT:-/var/lib/orsbox-podman}/storage/overlay" 2>/dev/null || true
}
trap 'stop_runsc_engine; stop_podman_engine' EXIT
export ORSBOX_REQUIRE_PODMAN="${ORSBOX_REQUIRE_PODMAN:-1}"
python3 -m pytest --durations=40 "$@"  # the slowest tests named in the log, to keep CI in budget
