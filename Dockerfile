# The vulcan image: one `vulcan` command, run by the Deployments as `vulcan extender ...` and
# `vulcan controllers ...`. Build with `make image` (docker, podman or buildah).
#
# Two stages on the same slim base: `build` makes wheels of vulcan and of every dependency (all
# of them publish binary wheels for CPython 3.12 on glibc x86_64 and aarch64, so no compiler is
# needed) and installs them under /install; the runtime stage copies that tree only, so neither
# the source, the wheels, pip's cache nor any build tool reaches the image.

ARG BASE_IMAGE=python:3.12-slim

FROM ${BASE_IMAGE} AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore

WORKDIR /src
# The context is the checkout less what .dockerignore leaves out (tests, bench, .git, .venv, ...).
COPY . .

# Wheels first (vulcan's own and its dependencies'), then an install from those wheels only,
# into a prefix the runtime stage copies into /usr/local. pip compiles the .pyc files here, so
# the runtime never needs to write any.
RUN pip wheel --prefer-binary --wheel-dir /wheels . \
    && pip install --no-index --find-links /wheels --prefix /install vulcan


FROM ${BASE_IMAGE}

ARG BASE_IMAGE
ARG VERSION=dev
ARG REVISION=unknown

LABEL org.opencontainers.image.title="vulcan" \
      org.opencontainers.image.description="Volcano-compatible gang and queue scheduling for the stock kube-scheduler: a scheduler extender plus controllers" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.base.name="${BASE_IMAGE}"

# Nothing is written at run time outside /tmp (mount an emptyDir there under a read-only root
# filesystem): no .pyc files, no buffered logs lost on a crash.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/home/vulcan

COPY --from=build /install /usr/local

# A numeric non-root user (65532, as distroless' "nonroot") with a home it owns, so
# `runAsNonRoot: true` holds without a runAsUser in the pod spec.
RUN groupadd --system --gid 65532 vulcan \
    && useradd --system --uid 65532 --gid 65532 --home-dir /home/vulcan --create-home \
        --shell /usr/sbin/nologin vulcan \
    && vulcan --version

USER 65532:65532
WORKDIR /home/vulcan

# extender: 8888 (HTTP extender API, /healthz, /readyz, /metrics) and 8443 (HTTPS admission
# webhooks); controllers: 8081 (/healthz, /readyz, /metrics).
EXPOSE 8888 8443 8081

ENTRYPOINT ["vulcan"]
CMD ["--help"]
