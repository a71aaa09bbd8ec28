#!/usr/bin/env bash
# Make the local Debian base image `orsbox/debian:bookworm` without a container registry:
# mmdebstrap builds a minimal bookworm root file system from the Debian mirror and
# `docker import` turns it into an image. Idempotent: does nothing when the image exists.
#
#   scripts/make-local-base.sh            # orsbox/debian:bookworm
#   LOCAL_BASE=me/deb:12 scripts/make-local-base.sh
set -euo pipefail

TAG="${LOCAL_BASE:-orsbox/debian:bookworm}"
PACKAGES="python3,bash,coreutils,procps,findutils,grep,sed,ca-certificates,passwd"

if docker image inspect "$TAG" >/dev/null 2>&1; then
    echo "make-local-base: $TAG already exists"
    exit 0
fi

if ! command -v mmdebstrap >/dev/null 2>&1; then
    echo "make-local-base: installing mmdebstrap"
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null
fi

echo "make-local-base: building $TAG with mmdebstrap (about 30 s)"
mmdebstrap --quiet --variant=minbase --include="$PACKAGES" bookworm - \
    | docker import --change 'CMD ["bash"]' --change 'ENV LANG=C.UTF-8' - "$TAG" >/dev/null
echo "make-local-base: made $TAG"
