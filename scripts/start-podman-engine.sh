#!/usr/bin/env bash
# Podman as a second, private engine: its Docker-compatible API, served by
# `podman system service`, for the conformance tests that run the Docker backend against
# it with only the engine address changed (tests/runtimes.py, docs/backends.md). The main
# engine is never touched.
#
# Installs Debian's podman and catatonit (the init `init=True` asks for) when missing,
# then serves the API on $ORSBOX_PODMAN_SOCKET from storage of its own
# ($ORSBOX_PODMAN_ROOT), with a containers.conf of its own that sets what this VM needs:
# cgroupfs and file events (no systemd), catatonit as the init, and `nofile`/`nproc`
# ulimits on every container at or under the host's hard limits (Podman's defaults try
# to raise them and this VM refuses: `error setting rlimit type 7`). Sandboxes have no
# network by default, so Podman adds no firewall rules. Then loads the images the tests
# need from the main engine (docker save | podman load, named localhost/NAME), skipping
# any it already holds. Idempotent. Prints the socket it serves (unix://...). Stop it
# with `kill $(cat $ORSBOX_PODMAN_PIDFILE)`, then `umount $ORSBOX_PODMAN_ROOT/storage/overlay`
# (the storage driver's own bind mount outlives the service).
set -euo pipefail

SOCKET="${ORSBOX_PODMAN_SOCKET:-/var/run/orsbox-podman.sock}"
PIDFILE="${ORSBOX_PODMAN_PIDFILE:-/tmp/orsbox-podman-service.pid}"
ROOT="${ORSBOX_PODMAN_ROOT:-/var/lib/orsbox-podman}"
IMAGES="${ORSBOX_PODMAN_IMAGES:-orsbox/base:latest}"
LOG="$ROOT/service.log"
HOST="unix://$SOCKET"

if ! command -v podman >/dev/null 2>&1 || ! command -v catatonit >/dev/null 2>&1; then
    echo "start-podman-engine: installing podman and catatonit" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman catatonit >/dev/null
fi

mkdir -p "$ROOT/storage" "$ROOT/run" "$ROOT/tmp"
# podman lowers its own RLIMIT_NPROC to 32768 when it starts, and a container may not
# ask for more than the service holds
nofile="$(ulimit -Hn)"
nproc="$(ulimit -Hu)"
if [ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ]; then nproc=32768; fi
cat >"$ROOT/containers.conf" <<CONF
[containers]
init_path = "$(command -v catatonit)"
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]

[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$ROOT/events.log"
tmp_dir = "$ROOT/tmp"
CONF
export CONTAINERS_CONF="$ROOT/containers.conf"
ours() { podman --root "$ROOT/storage" --runroot "$ROOT/run" --storage-driver overlay "$@"; }

answers() { DOCKER_HOST="$HOST" docker version >/dev/null 2>&1; }

if ! answers; then
    echo "start-podman-engine: serving podman's API on $SOCKET (log: $LOG)" >&2
    rm -f "$SOCKET"
    # In its own folder: conmon leaves files (an `oom` marker when a container is
    # OOM-killed) in the service's working directory, which would be the caller's.
    (cd "$ROOT" && exec nohup podman --root "$ROOT/storage" --runroot "$ROOT/run" \
        --storage-driver overlay system service --time=0 "$HOST") >"$LOG" 2>&1 &
    echo $! >"$PIDFILE"
    for _ in $(seq 120); do
        if answers; then
            break
        fi
        sleep 0.25
    done
    if ! answers; then
        echo "start-podman-engine: podman did not answer within 30 s; see $LOG" >&2
        tail -20 "$LOG" >&2
        kill "$(cat "$PIDFILE")" 2>/dev/null || true
        exit 1
    fi
fi

for image in $IMAGES; do
    wanted="$(docker image inspect --format '{{.Id}}' "$image")"
    have="$(ours image inspect --format '{{.Id}}' "localhost/$image" 2>/dev/null || true)"
    if [ "sha256:$have" != "$wanted" ] && [ "$have" != "$wanted" ]; then
        docker save "$image" | ours load -q >/dev/null
    fi
done
echo "$HOST"
