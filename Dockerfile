# syntax=docker/dockerfile:1
# vkprovider image: `vkprovider serve` (the entry point) plus the in-tree adapters, run as a
# non-root user with only the runtime dependencies of requirements.lock. docs/deploy.md.
#
# Base: pinned by exact tag. Pin the digest too when you build (this repository's build
# machines have no container builder or registry access, so it could not be resolved here):
#   docker buildx imagetools inspect python:3.11.14-slim-bookworm   # -> sha256:...
#   docker build --build-arg PYTHON_IMAGE=python:3.11.14-slim-bookworm@sha256:... -t vkprovider:0.1.0 .
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/vkprovider
WORKDIR /src
# Dependencies first (a layer that survives source changes): the lock is resolved with the
# test/dev extras, so it is used as *constraints* for the runtime dependencies pyproject.toml
# declares, never installed whole. verify-runtime.py fails the build if anything installed is
# missing from the lock or differs from it.
COPY pyproject.toml setup.py requirements.lock README.md ./
COPY deploy/image/verify-runtime.py /usr/local/bin/verify-runtime.py
COPY vkprovider ./vkprovider
COPY providers ./providers
RUN /opt/vkprovider/bin/pip install -c requirements.lock . \
 && /opt/vkprovider/bin/python /usr/local/bin/verify-runtime.py requirements.lock \
 && /opt/vkprovider/bin/python -m compileall -q /opt/vkprovider/lib

FROM ${PYTHON_IMAGE} AS runtime
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
