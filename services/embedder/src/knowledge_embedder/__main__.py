from knowledge_runtime.entrypoint import run

from knowledge_embedder.bootstrap import build_app


def main() -> None:
    run("embedder", build_app)


if __name__ == "__main__":
    main()
