#!/usr/bin/env bash
# Build the sandbox images, parents first: every image in images/ (orsbox/base, then
# orsbox/swe) and the bundled environments' own images (orsbox/env-swe). This wraps
# `orsbox build`, so the script and the CLI share one builder; arguments go to it
# (`scripts/build-images.sh images/base` builds only the base image). Builds use the
# engine's cache: rebuilding unchanged images takes seconds.
#
# BASE_IMAGE chooses what the root image starts from. Unset, it is `orsbox/debian:bookworm`
# (made here by make-local-base.sh when missing, since this machine may have no registry);
# set it to e.g. debian:bookworm-slim where a registry is reachable.
#
#   scripts/build-images.sh
#   BASE_IMAGE=debian:bookworm-slim scripts/build-images.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec python3 -m orsbox.cli.main build "$@"
