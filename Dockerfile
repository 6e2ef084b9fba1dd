# porchkit's images, installed from the committed lock (lock/*.txt) and nothing else.
#
#   docker build -t porchkit:latest .                                    # `manager` (the last stage)
#   docker build --target manager -t porchkit:latest .                   # the same, named
#   docker build --target fn-deltapipe -t example.com/porchkit/deltapipe:v0.1.0 .
#
# Stages:
#   builder        builds porchkit's wheel with the locked build backend (lock/build.txt)
#   base           python:3.11-slim, the environment and the shared labels
#   fn-deltapipe   the Δ pipeline as a kpt function image: no arguments, a ResourceList on stdin
#                  (kpt fn eval --image IMG --fn-config CFG; `image:` in a Kptfile; Porch);
#                  base + lock/fn.txt (what the function imports) + the wheel, as uid 65532
#   manager        `porchkit`, for the in-cluster controllers (deploy/); the default target;
#                  base + lock/runtime.txt + the wheel, as uid 65532
#
# Both lock files pin the versions of lock/dev.txt, the set every test runs with. Every pip
# install checks hashes (--require-hashes), installs nothing the lock does not name (--no-deps)
# and takes wheels only (--only-binary): the final stages need no compiler.
# tests/krmfn/test_function_image.py reads this file: it runs the fn-deltapipe ENTRYPOINT from an
# environment installed with the same pip arguments, under the real kpt.

# Pin it further with a digest if you need bit-for-bit rebuilds: --build-arg PYTHON_IMAGE=python:3.11-slim@sha256:...
ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
COPY lock/build.txt lock/build.txt
RUN pip install --no-cache-dir --require-hashes --only-binary=:all: -r lock/build.txt
COPY pyproject.toml README.md ./
COPY krmyaml krmyaml
COPY deltapipe deltapipe
COPY reconcile reconcile
COPY krmfn krmfn
COPY porchvariant porchvariant
COPY decorators decorators
COPY mapctl mapctl
COPY porchkit porchkit
RUN pip wheel --no-cache-dir --no-deps --no-build-isolation --wheel-dir /wheels .

# What both images share: the base, the environment, the labels that do not depend on the image.
FROM ${PYTHON_IMAGE} AS base
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
LABEL org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="0.1.0"
WORKDIR /

FROM base AS fn-deltapipe
LABEL org.opencontainers.image.title="porchkit-fn-deltapipe" \
      org.opencontainers.image.description="kpt function: run a Δ pipeline (fn.porchkit.dev/v1alpha1 Pipeline) over a package to generate, reshape or patch its resources. Documentation: kpt fn doc --image IMAGE"
# Only what the function imports (lock/fn.txt), not the controllers' Kubernetes client.
COPY lock/fn.txt /tmp/porchkit/fn.txt
RUN pip install --no-cache-dir --require-hashes --no-deps --only-binary=:all: -r /tmp/porchkit/fn.txt \
    && rm -rf /tmp/porchkit
COPY --from=builder /wheels/ /tmp/porchkit/
RUN pip install --no-cache-dir --no-deps /tmp/porchkit/porchkit-*.whl \
    && rm -rf /tmp/porchkit
# kpt runs function containers as `nobody` (docker run --user nobody); both users can read everything.
USER 65532:65532
ENTRYPOINT ["porchkit", "fn", "deltapipe"]
CMD []

FROM base AS manager
LABEL org.opencontainers.image.title="porchkit" \
      org.opencontainers.image.description="porchkit manager: the PackageVariant, PackageVariantSet, DecoratorController and MapController controllers in one process"
COPY lock/runtime.txt /tmp/porchkit/runtime.txt
RUN pip install --no-cache-dir --require-hashes --no-deps --only-binary=:all: -r /tmp/porchkit/runtime.txt \
    && rm -rf /tmp/porchkit
COPY --from=builder /wheels/ /tmp/porchkit/
RUN pip install --no-cache-dir --no-deps /tmp/porchkit/porchkit-*.whl \
    && rm -rf /tmp/porchkit
USER 65532:65532
ENTRYPOINT ["porchkit"]
CMD []
