"""An S3-protocol server on 127.0.0.1 for the object-store tests: moto's standalone server, which
stands in for MinIO or S3 (it speaks the same wire protocol; boto3 inspects it).

It runs in a process of its own (``python -m tests.support.object_store PORT``) that takes
commands on stdin: ``stop`` closes its listener and ``start`` opens it again on the same port,
with every object kept (in memory, as a restarted MinIO keeps them on disk); ``slow S`` makes each
multipart part take S seconds more, so a test can act while an upload is being sent.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from tests.support.net import free_port

ROOT = Path(__file__).resolve().parents[2]
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "knowledge-tests",
    "AWS_SECRET_ACCESS_KEY": "knowledge-tests-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",  # never ask an instance metadata service for credentials
}


class S3Server:
    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.object_store", str(self.port)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self._expect("listening")
        import boto3

        self.client = boto3.client("s3", endpoint_url=self.endpoint, **_boto3_credentials())

    def _command(self, line: str, answer: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        self._expect(answer)

    def _expect(self, answer: str) -> None:
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        assert line == answer, f"the S3 test server said {line!r}, not {answer!r}"

    def stop(self) -> None:
        self._command("stop", "stopped")

    def start(self) -> None:
        self._command("start", "listening")

    def slow_parts(self, seconds: float) -> None:
        self._command(f"slow {seconds}", "ok")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def new_bucket(self) -> str:
        name = f"knowledge-{uuid.uuid4().hex[:12]}"
        self.client.create_bucket(Bucket=name)
        return name

    def settings(self, bucket: str, prefix: str = "blobs") -> dict[str, str]:
        """The environment of a content-index on this server (KNOWLEDGE_* and the AWS credentials)."""
        return {
            "KNOWLEDGE_BLOB_STORE": "s3",
            "KNOWLEDGE_BLOB_S3_BUCKET": bucket,
            "KNOWLEDGE_BLOB_S3_PREFIX": prefix,
            "KNOWLEDGE_BLOB_S3_ENDPOINT": self.endpoint,
            "KNOWLEDGE_BLOB_S3_REGION": "us-east-1",
            **CREDENTIALS,
        }

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return sorted(item["Key"] for page in pages for item in page.get("Contents", []))

    def incomplete_uploads(self, bucket: str) -> list[str]:
        return [u["Key"] for u in self.client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])]

    def read(self, bucket: str, key: str) -> bytes:
        return self.client.get_object(Bucket=bucket, Key=key)["Body"].read()


def _boto3_credentials() -> dict[str, str]:
    return {
        "aws_access_key_id": CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        "region_name": CREDENTIALS["AWS_DEFAULT_REGION"],
    }


def _serve(port: int) -> None:
    import logging
    import threading

    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    app = DomainDispatcherApplication(create_backend_app)
    delay = {"part_s": 0.0}

    def application(environ, start_response):
        if "partNumber=" in environ.get("QUERY_STRING", "") and delay["part_s"]:
            time.sleep(delay["part_s"])
        return app(environ, start_response)

    server = None
    thread = None

    def start() -> None:
        nonlocal server, thread
        server = make_server("127.0.0.1", port, application, threaded=True, request_handler=MotoRequestHandler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()

    start()
    print("listening", flush=True)
    for line in sys.stdin:
        command, _, argument = line.strip().partition(" ")
        if command == "stop" and server is not None:
            server.shutdown()
            server.server_close()
            server = None
            print("stopped", flush=True)
        elif command == "start" and server is None:
            start()
            print("listening", flush=True)
        elif command == "slow":
            delay["part_s"] = float(argument)
            print("ok", flush=True)
    os._exit(0)


if __name__ == "__main__":
    _serve(int(sys.argv[1]))
