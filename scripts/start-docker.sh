#!/usr/bin/env bash
# Make sure a Docker engine answers: install docker.io from Debian when dockerd is
# missing, start dockerd in the background when nothing answers, wait for its socket.
# Idempotent; prints the dockerd pid it started (if any) to $DOCKERD_PIDFILE.
set -euo pipefail

PIDFILE="${DOCKERD_PIDFILE:-/tmp/orsbox-dockerd.pid}"
LOG="${DOCKERD_LOG:-/tmp/orsbox-dockerd.log}"

if docker info >/dev/null 2>&1; then
    exit 0
fi
if ! command -v dockerd >/dev/null 2>&1; then
    echo "start-docker: installing docker.io" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
fi
echo "start-docker: starting dockerd (log: $LOG)" >&2
nohup dockerd >"$LOG" 2>&1 &
echo $! >"$PIDFILE"
for _ in $(seq 120); do
    if docker info >/dev/null 2>&1; then
        exit 0
    fi
    sleep 0.5
done
echo "start-docker: dockerd did not answer within 60 s; see $LOG" >&2
tail -20 "$LOG" >&2
exit 1
