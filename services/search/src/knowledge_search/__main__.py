from knowledge_runtime.entrypoint import run

from knowledge_search.bootstrap import build_app


def main() -> None:
    run("search", build_app)


if __name__ == "__main__":
    main()
