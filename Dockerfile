# syntax=docker/dockerfile:1
# vkprovider image: `vkprovider serve` (the entry point) plus the in-tree adapters, run as a
# non-root user with only the runtime dependencies, installed by hash. docs/deploy.md.
#
# Base: pinned by tag and by the digest of the official image's multi-architecture index, so a
# re-pushed tag cannot change what is built. The digest was taken from public material (this
# repository's build machines have no registry access to resolve it); check it, and re-pin on
# every base bump, with
#   docker buildx imagetools inspect python:3.11.14-slim-bookworm   # "Digest: sha256:..."
# The ARG stays overridable (a mirror, a newer patch release):
#   docker build --build-arg PYTHON_IMAGE=registry.example.com/python:3.11.14-slim-bookworm@sha256:... .
# Where no registry is reachable, `make image` builds this same file with buildah on a base made
# from Debian's archive (bookworm's python3 3.11 + venv, by mmdebstrap; vkprovider/devcluster/image.py).
#
# Reproducible: with --build-arg SOURCE_DATE_EPOCH=<seconds> (and buildah --timestamp, or
# BuildKit's rewrite-timestamp) two builds of the same inputs make the same layers; bytecode is
# compiled hash-based, so it neither records nor depends on the files' times.
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d

FROM ${PYTHON_IMAGE} AS build
ARG SOURCE_DATE_EPOCH
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/vkprovider
WORKDIR /src
# Dependencies first (a layer that survives source changes), each one checked against its hash:
# requirements-image.lock holds the runtime dependencies of pyproject.toml and the build backend,
# at the pins of requirements.lock (`make lock` makes both), with hashes. --no-deps: nothing that
# the lock does not name is installed; then the project itself, built offline by that backend.
# `pip check` fails on a dependency the lock lacks; verify-runtime.py fails the build if anything
# installed is missing from the lock or differs from it.
COPY requirements-image.lock ./
COPY deploy/image/verify-runtime.py /usr/local/bin/verify-runtime.py
RUN /opt/vkprovider/bin/pip install --no-compile --require-hashes --no-deps -r requirements-image.lock
COPY pyproject.toml setup.py README.md ./
COPY vkprovider ./vkprovider
COPY providers ./providers
# Bytecode once, for everything (-f: the venv's own pip too), hash-based and unchecked: the root
# filesystem is read-only at run time, so the sources cannot change under it, and a
# timestamp-based .pyc would record the build's file times (and go stale when a reproducible
# build rewrites them).
RUN /opt/vkprovider/bin/pip install --no-compile --no-deps --no-build-isolation --no-index . \
 && /opt/vkprovider/bin/pip check \
 && /opt/vkprovider/bin/python /usr/local/bin/verify-runtime.py requirements-image.lock \
 && /opt/vkprovider/bin/python -m compileall -q -f --invalidation-mode unchecked-hash /opt/vkprovider/lib

FROM ${PYTHON_IMAGE} AS runtime
# useradd records the day of the last password change: SOURCE_DATE_EPOCH's day when it is set.
ARG SOURCE_DATE_EPOCH
LABEL org.opencontainers.image.title="vkprovider" \
      org.opencontainers.image.description="Virtual Kubelet provider bursting GPU inference to external GPU clouds" \
      org.opencontainers.image.licenses="Apache-2.0"
# A fixed numeric UID/GID, so runAsNonRoot can verify it and runAsUser matches (deployment.yaml).
RUN groupadd --system --gid 10001 vkprovider \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin vkprovider
COPY --from=build /opt/vkprovider /opt/vkprovider
# Bytecode is compiled at build time: the root filesystem is read-only at run time.
# Anything that wants a writable cache dir gets the /tmp emptyDir of the Deployment.
ENV PATH=/opt/vkprovider/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MPLCONFIGDIR=/tmp/matplotlib
USER 10001:10001
EXPOSE 10250 10255
ENTRYPOINT ["vkprovider"]
CMD ["serve", "--config", "/etc/vkprovider/config.yaml"]
