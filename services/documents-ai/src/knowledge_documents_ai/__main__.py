from knowledge_runtime.entrypoint import run

from knowledge_documents_ai.bootstrap import build_app


def main() -> None:
    run("documents-ai", build_app)


if __name__ == "__main__":
    main()
