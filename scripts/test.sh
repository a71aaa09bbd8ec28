#!/usr/bin/env bash
# The project's test command (the README's, and what CI runs): installs what the tests
# need on a fresh Debian 12 machine, starts a Docker engine, builds every sandbox image
# (orsbox/base, orsbox/swe and the bundled environments' own, through `orsbox build`),
# then runs ruff, mypy and the whole pytest suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# Bytecode caches for this checkout's modules. With PYTHONDONTWRITEBYTECODE set (as it
# was in the shell that ran this suite here), no process wrote any: every server, CLI
# and pytest process compiled orsbox and the tests from source again (an orsbox server's
# imports: 1.2 -> 1.0 s of CPU with the cache; pytest's collection 18 -> 13 s).
unset PYTHONDONTWRITEBYTECODE
# Where the setup's time goes, in CI's log: each step's end, in seconds from the start.
setup_started=$SECONDS
stamp() { echo "test.sh: $1 at +$((SECONDS - setup_started)) s"; }

# The Python side installs in the background while Debian's packages install below (on
# a fresh machine both mostly wait on downloads). TRL's ORS adapter
# (tests/integrations/test_trl_adapter.py) imports neither torch nor transformers, and
# what it does import (openreward, datasets) the test extra has: TRL alone takes seconds
# where its dependencies (torch, transformers, accelerate) took minutes. The
# GRPOTrainer smoke that needs them runs under `-m trl` (docs/train-with-trl.md).
# Every log and lock below is a file of this folder, removed however the run ends (a
# failed install or type check included: each left its log in /tmp).
run_dir="$(mktemp -d)"
trap 'rm -rf "$run_dir"' EXIT
pip_log="$(mktemp -p "$run_dir")"
# the two editable installs of this checkout (here and Harbor's venv) and the server
# image's wheel take turns: each writes orsbox.egg-info in the checkout
editable_lock="$(mktemp -p "$run_dir")"
(
    flock "$editable_lock" \
        python3 -m pip install --quiet --disable-pip-version-check -e '.[test,inspect,docs]'
    python3 -m pip install --quiet --disable-pip-version-check --no-deps trl==1.16.0
) >"$pip_log" 2>&1 &
pip_install=$!
export ORSBOX_REQUIRE_TRL=1
# Harbor 0.26 itself (Python >= 3.12, from pyenv) for the Harbor environment's parity
# tests (tests/integrations/test_harbor_environment.py), with this checkout's orsbox:
# installed in the background while the packages install, the engine starts and the
# images build.
HARBOR_VENV="${ORSBOX_HARBOR_VENV:-/opt/orsbox-harbor-venv}"
harbor_log="$(mktemp -p "$run_dir")"
(
    if [ ! -x "$HARBOR_VENV/bin/harbor" ]; then
        "${PYENV_ROOT:-$HOME/.pyenv}/versions/3.12.1/bin/python" -m venv "$HARBOR_VENV"
        "$HARBOR_VENV/bin/pip" install --quiet --disable-pip-version-check harbor==0.26.0
    fi
    flock "$editable_lock" "$HARBOR_VENV/bin/pip" install --quiet --disable-pip-version-check -e .
) >"$harbor_log" 2>&1 &
harbor_install=$!
# platoon 0.4.0 (Python >= 3.12, on PyPI) in a venv of its own, for its real ORS service
# against two orsbox servers (tests/integrations/trainers/test_platoon_source.py), also
# in the background: about 40 s of download and install here.
PLATOON_VENV="${ORSBOX_PLATOON_VENV:-/opt/orsbox-platoon-venv}"
platoon_log="$(mktemp -p "$run_dir")"
(
    if [ ! -x "$PLATOON_VENV/bin/python" ] || ! "$PLATOON_VENV/bin/python" -c 'import platoon.envs.ors' 2>/dev/null; then
        "${PYENV_ROOT:-$HOME/.pyenv}/versions/3.12.1/bin/python" -m venv "$PLATOON_VENV"
        "$PLATOON_VENV/bin/pip" install --quiet --disable-pip-version-check \
            'platoon[ors]==0.4.0' openreward==0.1.167
    fi
) >"$platoon_log" 2>&1 &
platoon_install=$!
# Debian's packages, all in one apt transaction (each `apt-get update` and dpkg run
# costs seconds on a fresh machine): docker.io (scripts/start-docker.sh); Podman and
# catatonit, runsc from bookworm-backports (Debian 12's own 2022 build breaks statx), for
# the second engines (scripts/start-podman-engine.sh, start-runsc-engine.sh, which would
# install them alone otherwise); chromium and its driver for the status page test
# (tests/monitoring/test_status_page.py); HAProxy and iproute2 for the cluster router
# (`ip`: each cell's private engine gets a bridge of its own; docs/cluster.md);
# docker-registry for the loopback registry (tests/registry.py, orsbox.cluster.registry);
# Debian's docker-compose 1.29, which brings deploy/compose up (tests/deploy); squid
# and iptables for allow-listed networks' egress proxy (orsbox.sandbox.host.proxy,
# docs/network.md), run by orsbox per sandbox: the package's own service is not wanted;
# musl-tools, whose musl-gcc builds the sleeping guest's native sleeper
# (orsbox/sandbox/guest/sleeper/, tests/sandbox/test_guest_sleep.py).
# The engine and mmdebstrap go in first: the local Debian base image
# (scripts/make-local-base.sh, about 30 s of mmdebstrap) is then made while the rest
# installs and pip runs, not after them.
first=()
command -v dockerd >/dev/null || first+=(docker.io)
no_mmdebstrap=0
command -v mmdebstrap >/dev/null || no_mmdebstrap=1
packages=()
command -v podman >/dev/null && command -v catatonit >/dev/null || packages+=(podman catatonit)
if ! command -v runsc >/dev/null || runsc --version 2>&1 | grep -q '0.0~2022'; then
    echo "deb http://deb.debian.org/debian bookworm-backports main" \
        >/etc/apt/sources.list.d/orsbox-bookworm-backports.list
    packages+=(runsc/bookworm-backports)
fi
command -v chromium >/dev/null && command -v chromedriver >/dev/null || packages+=(chromium chromium-driver)
command -v haproxy >/dev/null && command -v ip >/dev/null || packages+=(haproxy iproute2)
command -v docker-registry >/dev/null || packages+=(docker-registry)
command -v docker-compose >/dev/null || packages+=(docker-compose)
command -v musl-gcc >/dev/null || packages+=(musl-tools)
no_squid=0
command -v squid >/dev/null || [ -x /usr/sbin/squid ] || no_squid=1
apt_install() { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null; }
if [ "${#first[@]}" -gt 0 ] || [ "${#packages[@]}" -gt 0 ] || [ "$no_squid$no_mmdebstrap" != 00 ]; then
    apt-get update -qq
fi
if [ "${#first[@]}" -gt 0 ]; then apt_install "${first[@]}"; fi
if [ "$no_mmdebstrap" = 1 ]; then apt_install --no-install-recommends mmdebstrap; fi
stamp "the engine's packages"
bash scripts/start-docker.sh
stamp "the Docker engine"
base_log="$(mktemp -p "$run_dir")"
bash scripts/make-local-base.sh >"$base_log" 2>&1 &
local_base=$!
if [ "${#packages[@]}" -gt 0 ]; then apt_install "${packages[@]}"; fi
if [ "$no_squid" = 1 ]; then
    apt_install --no-install-recommends squid iptables
    (systemctl disable --now squid || service squid stop) >/dev/null 2>&1 || true
fi
stamp "Debian's packages"
if ! wait "$pip_install"; then
    cat "$pip_log" >&2
    echo "the Python packages could not be installed" >&2
    exit 1
fi
cat "$pip_log"
rm -f "$pip_log"
stamp "the Python packages"
# Types: mypy over orsbox/ as [tool.mypy] in pyproject.toml says (its cache in
# .mypy_cache): about 30 s cold on 2 idle cores (26 s of CPU), 3 s from the cache; it
# runs while the images build and the gVisor and Podman engines start
type_log="$(mktemp -p "$run_dir")"
python3 -m mypy >"$type_log" 2>&1 &
type_check=$!
if ! wait "$local_base"; then
    cat "$base_log" >&2
    echo "the local Debian base image could not be made" >&2
    exit 1
fi
cat "$base_log"
rm -f "$base_log"
stamp "the local Debian base"
# The deployment's images (tests/deploy, README "Running the server in Docker"): the
# server's, the router's and the registry's, built without network inside the build.
# They need only the local Debian base and pip's wheels, so they build while the
# sandbox images do (they took 40 s after them). Its `pip wheel` of the checkout writes
# orsbox.egg-info too, so it takes its turn with the editable installs.
server_log="$(mktemp -p "$run_dir")"
flock "$editable_lock" python3 -m orsbox.cli.main build --server >"$server_log" 2>&1 &
server_build=$!
bash scripts/build-images.sh
stamp "the sandbox images"
# CI owns its Docker engine, so the tests that stop and restart it run here
export ORSBOX_DISRUPTIVE_TESTS="${ORSBOX_DISRUPTIVE_TESTS:-1}"
# gVisor: a second, private engine with runsc for the runsc half of the conformance and
# adversarial tests (tests/runtimes.py); Podman: its Docker-compatible API as a third
# real engine for the conformance suite. The tests fail rather than skip when either
# is missing. Both start (each loads the base image) while the deployment's images
# finish, and stop when the tests end; the main engine is never touched.
stop_runsc_engine() {
    local pid
    pid="$(cat "${ORSBOX_RUNSC_PIDFILE:-/tmp/orsbox-runsc-dockerd.pid}" 2>/dev/null || true)"
    if [ -n "$pid" ] && kill "$pid" 2>/dev/null; then
        while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
    fi
    # A shim that deadlocked (containerd 1.6 when a kill meets gVisor's ending stubs:
    # docs/gvisor.md) outlives its engine: found by this engine's containerd socket in its
    # command line (never by its name), killed, and runsc's record of it deleted.
    local root="${ORSBOX_RUNSC_ROOT:-/var/lib/orsbox-runsc}" shim id
    for shim in $(pgrep -f -- "-address $root/exec/containerd/containerd.sock" || true); do
        kill -9 "$shim" 2>/dev/null || true
    done
    for id in $(runsc --root "$root/exec/runtime-runc/moby" list 2>/dev/null | awk 'NR > 1 {print $1}'); do
        runsc --root "$root/exec/runtime-runc/moby" delete --force "$id" 2>/dev/null || true
    done
    ip link del "${ORSBOX_RUNSC_BRIDGE:-orsbox-gvisor}" 2>/dev/null || true
}
stop_podman_engine() {
    local pid
    pid="$(cat "${ORSBOX_PODMAN_PIDFILE:-/tmp/orsbox-podman-service.pid}" 2>/dev/null || true)"
    if [ -n "$pid" ] && kill "$pid" 2>/dev/null; then
        while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
    fi
    # its storage driver's own bind mount outlives the service
    umount "${ORSBOX_PODMAN_ROOT:-/var/lib/orsbox-podman}/storage/overlay" 2>/dev/null || true
}
trap 'stop_runsc_engine; stop_podman_engine; rm -rf "$run_dir"' EXIT
bash scripts/start-runsc-engine.sh &
runsc_start=$!
bash scripts/start-podman-engine.sh >/dev/null &
podman_start=$!
if ! wait "$server_build"; then
    cat "$server_log" >&2
    echo "the server's images could not be built" >&2
    exit 1
fi
cat "$server_log"
rm -f "$server_log"
stamp "the server images"
wait "$runsc_start"
wait "$podman_start"
stamp "the gVisor and Podman engines"
export ORSBOX_REQUIRE_RUNSC="${ORSBOX_REQUIRE_RUNSC:-1}"
export ORSBOX_REQUIRE_PODMAN="${ORSBOX_REQUIRE_PODMAN:-1}"
if ! wait "$harbor_install"; then
    cat "$harbor_log" >&2
    echo "the Harbor venv ($HARBOR_VENV) could not be installed" >&2
    exit 1
fi
rm -f "$harbor_log" "$editable_lock"
stamp "Harbor's venv"
export ORSBOX_HARBOR_VENV="$HARBOR_VENV" ORSBOX_REQUIRE_HARBOR=1
if ! wait "$platoon_install"; then
    cat "$platoon_log" >&2
    echo "platoon's venv ($PLATOON_VENV) could not be installed" >&2
    exit 1
fi
rm -f "$platoon_log"
stamp "platoon's venv"
export ORSBOX_PLATOON_PYTHON="$PLATOON_VENV/bin/python"
ruff check .
ruff format --check orsbox tests docs/hooks
# The suite in two parts. Most test files run three at a time (pytest-xdist, a file per
# worker so that a module's server or cluster is made once): one pytest process left the
# 2 cores partly idle while it waited on engines and containers (28 minutes here), three
# keep both busy (14-18 minutes; four were no faster). The tests marked `serial` (time
# bounds, host-wide counts, the engine restart) then run alone, in under 3 minutes.
# Arguments (`-m full_matrix`, a path) run just what they name, in one plain pytest.
# --durations: the slowest tests named in the log, to keep CI in budget.
if ! wait "$type_check"; then
    cat "$type_log"
    exit 1
fi
cat "$type_log"
rm -f "$type_log"
status=0
if [ "$#" -gt 0 ]; then
    python3 -m pytest --durations=40 "$@" || status=$?
    exit "$status"
fi
stamp "the setup"
python3 -m pytest -n "${ORSBOX_TEST_WORKERS:-3}" --dist loadfile -m "not serial" --durations=40 || status=$?
stamp "the tests run in parallel"
# only the files holding serial tests are collected again (collecting all takes ~15 s)
mapfile -t serial_files < <(grep -rl --include='test_*.py' 'pytest.mark.serial' tests)
python3 -m pytest -m serial --durations=10 "${serial_files[@]}" || status=$?
stamp "the serial tests"
exit "$status"
