from knowledge_runtime.entrypoint import run

from knowledge_content_index.bootstrap import build_app


def main() -> None:
    run("content-index", build_app)


if __name__ == "__main__":
    main()
