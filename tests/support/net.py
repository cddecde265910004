"""Free local ports for the servers a test starts (they bind 127.0.0.1 only), and a local web site."""

from __future__ import annotations

import socket


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LocalSite:
    """A local web site on a free port: pages, a redirect to one, redirects to refused addresses."""

    def __init__(self, pages: dict[str, tuple[str, bytes]]) -> None:
        import http.server
        import threading
        import time

        site = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                site.requests.append(self.path)
                if self.path in site.delays:
                    time.sleep(site.delays[self.path])
                if self.path in site.redirects:
                    self.send_response(302)
                    self.send_header("Location", site.redirects[self.path])
                    self.end_headers()
                    return
                if self.path not in site.pages:
                    self.send_error(404)
                    return
                content_type, body = site.pages[self.path]
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.pages = pages
        self.redirects: dict[str, str] = {}
        self.delays: dict[str, float] = {}  # seconds a path waits before it answers
        self.requests: list[str] = []
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
