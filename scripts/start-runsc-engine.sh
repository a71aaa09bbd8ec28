#!/usr/bin/env bash
# A second, private Docker engine with gVisor's `runsc` registered, for the tests and
# benchmarks that run sandboxes under gVisor. The main engine is never touched.
#
# Installs runsc from bookworm-backports when missing (Debian 12's own 2022 build answers
# EINVAL to coreutils' statx: `ls` and `stat` fail inside), starts dockerd with its own data-root, exec-root,
# socket and pid file and a bridge of its own ($ORSBOX_RUNSC_BRIDGE; not `bridge: none`,
# with which dockerd deletes the host's docker0 and breaks the main engine's networks;
# no iptables: runsc sandboxes get no network anyway),
# then loads the images the runsc tests need from the main engine (docker save | load),
# skipping any it already holds or the main engine lacks. Its bridge does no NAT
# (`ip-masq: false`), so image builds on this engine reach no network: `orsbox serve
# --engine` builds missing images on the main engine and copies them in (docs/gvisor.md).
# Idempotent. Prints nothing on success; the socket is
# $ORSBOX_RUNSC_SOCKET (default /var/run/orsbox-runsc.sock). Stop it with
# `kill $(cat $ORSBOX_RUNSC_PIDFILE)`, then `ip link del $ORSBOX_RUNSC_BRIDGE`.
#
# runtimeArgs (see docs/gvisor.md): --network=none (gVisor issue 10704: every start fails
# with network enabled on newer kernels), --overlay2=none (with the rootfs overlay, files
# created inside cannot be copied out), and the platform: `runsc` runs on systrap,
# `runsc-ptrace` (the same binary, for benchmarks comparing the two) on ptrace; kvm hangs
# on these VMs. An engine already running keeps the runtimes it was started with.
#
# A second private engine beside this one: set ORSBOX_RUNSC_SOCKET, ORSBOX_RUNSC_PIDFILE,
# ORSBOX_RUNSC_ROOT, ORSBOX_RUNSC_BRIDGE and ORSBOX_RUNSC_BRIDGE_CIDR (the bridge's
# address, default 198.18.254.1/24; another engine needs another subnet) to its own.
set -euo pipefail

SOCKET="${ORSBOX_RUNSC_SOCKET:-/var/run/orsbox-runsc.sock}"
PIDFILE="${ORSBOX_RUNSC_PIDFILE:-/tmp/orsbox-runsc-dockerd.pid}"
ROOT="${ORSBOX_RUNSC_ROOT:-/var/lib/orsbox-runsc}"
IMAGES="${ORSBOX_RUNSC_IMAGES:-orsbox/base:latest}"
BRIDGE="${ORSBOX_RUNSC_BRIDGE:-orsbox-gvisor}"
BRIDGE_CIDR="${ORSBOX_RUNSC_BRIDGE_CIDR:-198.18.254.1/24}"
LOG="$ROOT/dockerd.log"
HOST="unix://$SOCKET"

BACKPORTS=/etc/apt/sources.list.d/orsbox-bookworm-backports.list
if ! command -v runsc >/dev/null 2>&1 || runsc --version 2>&1 | grep -q '0.0~2022'; then
    echo "start-runsc-engine: installing runsc from bookworm-backports" >&2
    echo "deb http://deb.debian.org/debian bookworm-backports main" >"$BACKPORTS"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -t bookworm-backports runsc >/dev/null
fi

if ! DOCKER_HOST="$HOST" docker info >/dev/null 2>&1; then
    mkdir -p "$ROOT/data" "$ROOT/exec"
    if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
        ip link add "$BRIDGE" type bridge
        ip addr add "$BRIDGE_CIDR" dev "$BRIDGE"
        ip link set "$BRIDGE" up
    fi
    cat >"$ROOT/daemon.json" <<JSON
{
  "data-root": "$ROOT/data",
  "exec-root": "$ROOT/exec",
  "hosts": ["$HOST"],
  "pidfile": "$PIDFILE",
  "bridge": "$BRIDGE",
  "iptables": false,
  "ip-forward": false,
  "ip-masq": false,
  "runtimes": {
    "runsc": {
      "path": "$(command -v runsc)",
      "runtimeArgs": ["--network=none", "--platform=systrap", "--overlay2=none"]
    },
    "runsc-ptrace": {
      "path": "$(command -v runsc)",
      "runtimeArgs": ["--network=none", "--platform=ptrace", "--overlay2=none"]
    }
  }
}
JSON
    echo "start-runsc-engine: starting a private dockerd on $SOCKET (log: $LOG)" >&2
    nohup dockerd --config-file "$ROOT/daemon.json" >"$LOG" 2>&1 &
    for _ in $(seq 120); do
        if DOCKER_HOST="$HOST" docker info >/dev/null 2>&1; then
            break
        fi
        sleep 0.25
    done
    if ! DOCKER_HOST="$HOST" docker info >/dev/null 2>&1; then
        echo "start-runsc-engine: dockerd did not answer within 30 s; see $LOG" >&2
        tail -20 "$LOG" >&2
        exit 1
    fi
fi

for image in $IMAGES; do
    # On a fresh machine the main engine may hold none yet (or not answer): nothing to
    # copy, and `orsbox serve --engine ...` builds what it needs there and copies it in.
    wanted="$(docker image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)"
    if [ -z "$wanted" ]; then
        echo "start-runsc-engine: $image is not on the main engine; not copied" >&2
        continue
    fi
    have="$(DOCKER_HOST="$HOST" docker image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)"
    if [ "$wanted" != "$have" ]; then
        docker save "$image" | DOCKER_HOST="$HOST" docker load -q >/dev/null
    fi
done
