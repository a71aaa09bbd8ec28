# The orsbox host server's own image, `orsbox/server` (docs/cluster.md, deploy/).
#
#   orsbox build --server          # here: no registry, no network inside the build
#   docker build -t orsbox/server .    # where a registry and PyPI are reachable
#   docker run --rm -p 8080:8080 -v /var/run/docker.sock:/var/run/docker.sock orsbox/server
#
# The server starts sandbox containers through the mounted Docker socket (so it is as
# privileged as Docker itself: run it only where you would run Docker).
#
# Two ways to get orsbox and its dependencies, chosen by what the context holds:
# * `wheels/*.whl` and `wheels/orsbox/*.whl` (written by `orsbox build --server`: `pip
#   wheel` on the host of the dependencies, pip's own and orsbox's): installed with
#   `--no-index`, so the build needs no network and BASE_IMAGE needs only python3 (the
#   local Debian base, `orsbox/debian:bookworm`). The base's Python must be the host's
#   minor version (the wheels' ABI, cp311).
# * no wheels: pip installs from PyPI inside the build (BASE_IMAGE with pip).
# Either way the install happens in a build stage, into a venv the final stage copies:
# no wheels, pip caches or build tools in the image.
#
# The native sleeper (orsbox/sandbox/guest/sleeper/) ships prebuilt in orsbox's wheel:
# setup.py compiles it where the wheel is built with musl-gcc (`orsbox build --server`
# warns when the host has none). This image has no compiler, so without it idle guests
# would sleep as bash. From PyPI, the install stage gets musl-tools and gcc (which
# musl-gcc runs) from apt, if it can, before building orsbox from /src. The build log
# says which it has.
ARG BASE_IMAGE=python:3.11-slim

FROM ${BASE_IMAGE} AS install
# pyproject.toml is in each wheels COPY so that it has a source when the context has no
# wheels (a file that changes when the dependencies do). The dependencies first, in a
# layer of their own: it stays cached while they do.
COPY pyproject.toml wheels/*.wh[l] /wheels/
RUN set -eu; \
    python3 -m venv --without-pip /opt/orsbox; \
    if ls /wheels/*.whl >/dev/null 2>&1; then \
        /opt/orsbox/bin/python "$(ls /wheels/pip-*.whl)/pip" install --no-cache-dir \
            --no-index --no-deps $(ls /wheels/*.whl | grep -v '/pip-'); \
    fi
COPY pyproject.toml setup.py README.md /src/
COPY orsbox /src/orsbox
COPY pyproject.toml wheels/orsbox/*.wh[l] /wheels/orsbox/
RUN set -eu; \
    if ls /wheels/orsbox/*.whl >/dev/null 2>&1; then \
        /opt/orsbox/bin/python "$(ls /wheels/pip-*.whl)/pip" install --no-cache-dir \
            --no-index --no-deps /wheels/orsbox/*.whl; \
    else \
        { apt-get update && apt-get install -y --no-install-recommends musl-tools gcc; } \
            || echo "no musl-tools: this image's idle guests will sleep as bash" >&2; \
        python3 -m pip --python /opt/orsbox/bin/python install --no-cache-dir /src; \
    fi; \
    /opt/orsbox/bin/python -c 'from orsbox.sandbox.guest.sleeper import shipped_binary; \
print("the native sleeper:", "shipped" if shipped_binary() else "none (guests sleep as bash)")'

FROM ${BASE_IMAGE}
COPY --from=install /opt/orsbox /opt/orsbox
WORKDIR /app
# `orsbox serve` finds the bundled environments and images/ in its working folder
COPY environments ./environments
COPY images ./images
ENV PATH=/opt/orsbox/bin:$PATH ORSBOX_HOST=0.0.0.0 ORSBOX_PORT=8080 PYTHONUNBUFFERED=1
EXPOSE 8080
# Serves the bundled environments. Build their sandbox images on the engine first
# (`orsbox build`): this image has no mmdebstrap to make the local Debian base.
CMD ["orsbox", "serve"]
