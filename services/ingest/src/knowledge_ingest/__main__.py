from knowledge_runtime.entrypoint import run

from knowledge_ingest.bootstrap import build_app


def main() -> None:
    run("ingest", build_app)


if __name__ == "__main__":
    main()
