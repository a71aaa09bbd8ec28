# The orsbox host server's own image.
#
#   docker build -t orsbox/server .
#   docker run --rm -p 8080:8080 -v /var/run/docker.sock:/var/run/docker.sock orsbox/server
#
# The server starts sandbox containers through the mounted Docker socket (so it is as
# privileged as Docker itself: run it only where you would run Docker). BASE_IMAGE is a
# build argument so machines without a registry can build on a locally imported base
# with python3 and pip (pip must reach PyPI during the build).
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

WORKDIR /app
COPY pyproject.toml README.md ./
COPY orsbox ./orsbox
COPY environments ./environments
COPY images ./images
RUN python3 -m pip install --no-cache-dir . \
    && useradd --system --home /app orsbox
ENV ORSBOX_HOST=0.0.0.0 ORSBOX_PORT=8080
EXPOSE 8080
# Serves the bundled environments. Build their sandbox images on the host first
# (`orsbox build`): this image has no mmdebstrap to make the local Debian base.
CMD ["orsbox", "serve"]
