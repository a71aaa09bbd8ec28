#!/usr/bin/env bash
# Build the orsbox sandbox image `orsbox/base:latest` from images/base.
#
# BASE_IMAGE chooses the image it starts from. Unset, it is `orsbox/debian:bookworm`
# (made here by make-local-base.sh when missing, since this machine may have no registry);
# set it to e.g. debian:bookworm-slim where a registry is reachable.
#
#   scripts/build-images.sh
#   BASE_IMAGE=debian:bookworm-slim scripts/build-images.sh
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$HERE")"
LOCAL_BASE="orsbox/debian:bookworm"
TAG="${IMAGE_TAG:-orsbox/base:latest}"

if [ -z "${BASE_IMAGE:-}" ]; then
    if ! docker image inspect "$LOCAL_BASE" >/dev/null 2>&1; then
        LOCAL_BASE="$LOCAL_BASE" "$HERE/make-local-base.sh"
    fi
    BASE_IMAGE="$LOCAL_BASE"
fi

echo "build-images: building $TAG from $BASE_IMAGE"
docker build --quiet --build-arg "BASE_IMAGE=$BASE_IMAGE" -t "$TAG" "$ROOT/images/base" >/dev/null
echo "build-images: built $TAG"
