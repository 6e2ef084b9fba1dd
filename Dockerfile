FROM python:3.11-slim
WORKDIR /src
COPY pyproject.toml README.md ./
COPY deltapipe deltapipe
COPY reconcile reconcile
COPY krmfn krmfn
COPY porchvariant porchvariant
COPY decorators decorators
COPY mapctl mapctl
COPY porchkit porchkit
RUN pip install --no-cache-dir . && rm -rf /src
WORKDIR /
USER 65532:65532
ENTRYPOINT ["porchkit"]
