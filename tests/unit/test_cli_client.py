"""The REST client of the `knowledge` command: exit codes a script can rely on, and the progress
that follows each ingestion job (against a fake gateway)."""

import io
import json

import httpx
import pytest
from knowledge_cli import client as codes
from knowledge_cli.client import ApiError, Client, error_from_response
from knowledge_cli.uploads import follow, progress_line


def status(code: int, message: str, reason: str = "") -> dict:
    details = [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason}] if reason else []
    return {"code": code, "message": message, "details": details}


@pytest.mark.parametrize(
    ("http", "exit_code"),
    [
        (400, codes.USAGE),
        (401, codes.AUTH),
        (403, codes.AUTH),
        (404, codes.NOT_FOUND),
        (409, codes.CONFLICT),
        (413, codes.TOO_LARGE),
        (429, codes.RATE_LIMITED),
        (500, codes.FAILED),
        (503, codes.FAILED),
    ],
)
def test_http_statuses_map_to_documented_exit_codes(http, exit_code):
    error = error_from_response(httpx.Response(http, json=status(5, "corpus not found", "CORPUS_NOT_FOUND")))
    assert error.exit_code == exit_code
    assert str(error) == f"corpus not found (HTTP {http} CORPUS_NOT_FOUND)"
    assert exit_code in codes.EXIT_CODES


def test_a_plain_text_error_still_gives_a_message():
    error = error_from_response(httpx.Response(502, text="upstream connect error"))
    assert error.exit_code == codes.FAILED and "HTTP 502" in str(error)


def test_rate_limited_calls_honour_retry_after_then_give_up():
    calls, slept = [], []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(429, headers={"Retry-After": "2"}, json=status(8, "local_rate_limited", "RATE_LIMITED"))

    client = Client("http://gw/api/v1/knowledge", "t", transport=httpx.MockTransport(handler), sleep=slept.append)
    with pytest.raises(ApiError) as raised:
        client.create_corpus("x")
    assert raised.value.exit_code == codes.RATE_LIMITED
    assert len(calls) == 4 and slept == [2.0, 2.0, 2.0]
    assert calls[0].headers["authorization"] == "Bearer t"


def test_unreachable_gateway_is_its_own_exit_code():
    def handler(request):
        raise httpx.ConnectError("refused")

    with pytest.raises(ApiError) as raised:
        Client("http://gw", "t", transport=httpx.MockTransport(handler)).create_corpus("x")
    assert raised.value.exit_code == codes.UNREACHABLE


def test_upload_streams_the_file_with_its_length(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_bytes(b"x" * (3 * 1024 * 1024 + 5))
    seen = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen["length"] = request.headers["content-length"]
        seen["params"] = dict(request.url.params)
        seen["body"] = len(request.read())
        return httpx.Response(200, json={"job_id": "j1", "filename": "notes.txt", "status": "ingesting"})

    sent = []
    handle = Client("http://gw", "t", transport=httpx.MockTransport(handler)).upload(path, "7", on_bytes=sent.append)
    assert handle["job_id"] == "j1"
    assert seen == {
        "length": str(3 * 1024 * 1024 + 5),
        "params": {"corpus_id": "7", "filename": "notes.txt"},
        "body": 3 * 1024 * 1024 + 5,
    }
    assert len(sent) == 4  # read and sent a megabyte at a time


def test_ingest_texts_sends_batches_of_a_thousand_and_numbers_answers_over_all_items():
    bodies = []

    def handler(request: httpx.Request) -> httpx.Response:
        items = json.loads(request.read())["items"]
        bodies.append((request.url.path, len(items)))
        return httpx.Response(
            200, json={"items": [{"index": i, "job": {"job_id": item["title"]}} for i, item in enumerate(items)]}
        )

    items = [{"corpus_id": "1", "text": f"t{i}", "title": f"j{i}"} for i in range(2500)]
    answers = list(Client("http://gw", "t", transport=httpx.MockTransport(handler)).ingest_texts(items))
    assert bodies == [("/texts:batch", 1000), ("/texts:batch", 1000), ("/texts:batch", 500)]
    assert [a["index"] for a in answers] == list(range(2500)) and answers[2499]["job"]["job_id"] == "j2499"


def test_follow_draws_each_stage_and_keeps_the_once_delivered_result():
    stages = iter(
        [
            {"state": "DOCUMENT_STATE_QUEUED", "progress": 0.0, "stage": "queued"},
            {"state": "DOCUMENT_STATE_EMBEDDING", "progress": 0.4, "stage": "embedding 3/10"},
            {"state": "DOCUMENT_STATE_EMBEDDING", "progress": 0.6, "stage": "embedding 6/10"},
            {
                "state": "DOCUMENT_STATE_SEARCHABLE",
                "progress": 1.0,
                "stage": "searchable",
                "result": {"document_id": "42", "chunk_count": 10},
            },
        ]
    )

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/api/ingest/j1"
        return httpx.Response(200, json={"job_id": "j1", **next(stages)})

    stream = io.StringIO()
    finals = follow(
        Client("http://gw/api", "t", transport=httpx.MockTransport(handler)),
        ["j1"],
        ["a.pdf"],
        stream,
        sleep=lambda _: None,
    )
    assert finals[0]["result"] == {"document_id": "42", "chunk_count": 10}
    lines = stream.getvalue().splitlines()
    assert [line.split("% ")[1] for line in lines] == [
        "queued a.pdf",
        "embedding 3/10 a.pdf",
        "embedding 6/10 a.pdf",
        "searchable a.pdf",
    ]
    assert progress_line("a.pdf", {"progress": 0.5, "stage": "chunking"}).startswith("[" + "#" * 12 + "-" * 12 + "]")


@pytest.fixture
def knowledge(monkeypatch):
    """``knowledge ARGS...`` in this process against a fake gateway: given the gateway's handler,
    a function that runs a command line and returns its exit code."""
    from knowledge_cli.main import parser

    def against(handler):
        real = httpx.Client.__init__
        monkeypatch.setattr(
            httpx.Client, "__init__", lambda self, **kw: real(self, **{**kw, "transport": httpx.MockTransport(handler)})
        )
        monkeypatch.setenv("KNOWLEDGE_TOKEN", "t")

        def run(*argv: str) -> int:
            options = parser().parse_args(list(argv))
            return options.run(options)

        return run

    return against


def test_commands_exit_with_the_codes(knowledge, monkeypatch, capsys, tmp_path):
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/corpora") and request.method == "POST":
            return httpx.Response(
                409, json=status(6, "a corpus with this name already exists", "CORPUS_ALREADY_EXISTS")
            )
        if "/documents/" in request.url.path:
            return httpx.Response(404, json=status(5, "document not found", "DOCUMENT_NOT_FOUND"))
        return httpx.Response(
            200,
            json={
                "corpora": [{"corpus_id": "1", "name": "HR", "document_count": 2, "chunk_count": 9}],
                "next_page_token": "",
            },
        )

    run = knowledge(handler)
    assert run("corpora", "list") == codes.OK
    assert capsys.readouterr().out.splitlines()[1] == "1\t2\t9\tHR"
    assert run("corpora", "list", "--json") == codes.OK
    assert json.loads(capsys.readouterr().out)[0]["name"] == "HR"
    assert run("corpora", "create", "HR") == codes.CONFLICT
    assert "CORPUS_ALREADY_EXISTS" in capsys.readouterr().err
    assert run("text", "9") == codes.NOT_FOUND
    assert run("delete", "9") == codes.NOT_FOUND
    assert run("upload", str(tmp_path / "missing.pdf"), "--corpus", "1") == codes.USAGE
    assert run("corpora", "list", "--url", "ftp://x") == codes.USAGE
    monkeypatch.delenv("KNOWLEDGE_TOKEN")
    assert run("corpora", "list") == codes.USAGE
    assert "no token" in capsys.readouterr().err


def test_ctrl_c_while_following_cancels_only_when_asked(knowledge, monkeypatch, capsys, tmp_path):
    from knowledge_cli import uploads

    cancelled = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/upload"):
            return httpx.Response(200, json={"job_id": "j9", "filename": "a.txt", "status": "ingesting"})
        if request.url.path.endswith(":cancel"):
            cancelled.append(request.url.path)
            return httpx.Response(200, json={"job": {"job_id": "j9", "state": "DOCUMENT_STATE_CANCELLED"}})
        raise AssertionError(request.url)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    run = knowledge(handler)
    monkeypatch.setattr(uploads, "follow", interrupted)
    (tmp_path / "a.txt").write_text("hello")

    assert run("upload", str(tmp_path / "a.txt"), "--corpus", "1") == codes.INTERRUPTED
    assert cancelled == [] and "j9 go on" in capsys.readouterr().err
    assert run("upload", str(tmp_path / "a.txt"), "--corpus", "1", "--cancel-on-interrupt") == codes.INTERRUPTED
    assert cancelled == ["/api/v1/knowledge/ingest/j9:cancel"]


def test_upload_of_a_url_asks_the_service_to_fetch_it(knowledge, capsys, tmp_path):
    import json as json_module

    asked = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/urls"):
            asked.append(json_module.loads(request.content))
            return httpx.Response(
                200,
                json={
                    "job_id": "u1",
                    "filename": "guide.html",
                    "status": "ingesting",
                    "source_url": "https://example.com/guide",
                },
            )
        if request.url.path.endswith("/upload"):
            asked.append(request.url.params["filename"])
            return httpx.Response(200, json={"job_id": "f1", "filename": "a.txt", "status": "ingesting"})
        raise AssertionError(request.url)

    (tmp_path / "a.txt").write_text("hello")
    run = knowledge(handler)
    assert run("upload", "https://example.com/guide", str(tmp_path / "a.txt"), "--corpus", "3", "--no-wait") == codes.OK
    assert asked == [{"url": "https://example.com/guide", "corpus_id": "3"}, "a.txt"]
    assert capsys.readouterr().out == "u1\thttps://example.com/guide\nf1\ta.txt\n"


# ---- usage and tenant settings -------------------------------------------------------------
def test_usage_prints_a_table_against_the_quotas(knowledge, capsys):
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        usage = {"period": "2026-12", "document_count": "14", "stored_bytes": "8412311", "chunk_count": "612"}
        usage |= {
            "embedding_tokens": "180311",
            "llm_tokens": "91200",
            "llm_cost": 4.12,
            "quotas": {"max_documents": "1000"},
        }
        return httpx.Response(200, json=usage)

    assert knowledge(handler)("usage", "--period", "2026-12") == codes.OK
    assert seen[0].url.path.endswith("/usage") and seen[0].url.params["period"] == "2026-12"
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "period 2026-12"
    rows = {line.split("  ")[0].strip(): line.split() for line in lines[2:]}
    assert rows["documents"][-2:] == ["14", "1000"] and rows["chunks"][-1] == "unlimited"
    assert rows["LLM cost"][-2:] == ["4.12", "unlimited"]


def test_usage_says_when_it_counts_only_the_tokens_part_of_the_tree(knowledge, capsys):
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"period": "2026-12", "document_count": "2", "scope": "workspace:eng"})

    assert knowledge(handler)("usage") == codes.OK
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("period 2026-12 (scope workspace:eng and below") and "usage.admin" in first


def test_tenants_set_puts_the_whole_settings_and_prints_them(knowledge, capsys):
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        settings = {"tenant": "acme", "enabled": False, "configured": True, "quotas": {"max_documents": "5"}}
        return httpx.Response(200, json={"settings": settings})

    run = knowledge(handler)
    assert run("tenants", "set", "acme", "--disable", "--max-documents", "5", "--max-llm-cost-per-month", "2.5") == 0
    assert seen[0].method == "PUT" and seen[0].url.path.endswith("/tenants/acme/settings")
    assert json.loads(seen[0].content) == {
        "enabled": False,
        "quotas": {"max_documents": 5, "max_llm_cost_per_month": 2.5},
    }
    out = capsys.readouterr().out
    assert out.startswith("tenant acme: disabled\n") and "max_documents: 5" in out and "max_bytes: unlimited" in out
    with pytest.raises(SystemExit):  # --enable or --disable is required: a PUT is the whole settings
        run("tenants", "set", "acme")


def _doc(document_id: str, state: str, stage: str, chunks: int = 0) -> dict:
    return {
        "document_id": document_id,
        "state": f"DOCUMENT_STATE_{state}",
        "stage": stage,
        "chunk_count": chunks,
        "filename": f"{document_id}.md",
        "error": "",
    }


WATCH_LINES = [
    {"kind": "DOCUMENT_CHANGE_KIND_SNAPSHOT", "document_id": "1", "document": _doc("1", "SEARCHABLE", "searchable", 3)},
    {"kind": "DOCUMENT_CHANGE_KIND_SYNCED", "document_id": ""},
    {"kind": "DOCUMENT_CHANGE_KIND_CHANGED", "document_id": "2", "document": _doc("2", "QUEUED", "queued")},
    {"kind": "DOCUMENT_CHANGE_KIND_CHANGED", "document_id": "2", "document": _doc("2", "EMBEDDING", "embedding 2/4")},
    {"kind": "DOCUMENT_CHANGE_KIND_CHANGED", "document_id": "2", "document": _doc("2", "SEARCHABLE", "searchable", 4)},
    {"kind": "DOCUMENT_CHANGE_KIND_REMOVED", "document_id": "1"},
]


def test_documents_watch_prints_the_list_then_each_change(knowledge, capsys):
    from knowledge_cli.documents import watch_documents

    paths = []

    def handler(request: httpx.Request) -> httpx.Response:
        paths.append(request.url.path)
        return httpx.Response(200, content="".join(json.dumps(line) + "\n" for line in WATCH_LINES).encode())

    client = Client("http://gw/api/v1/knowledge", "t", transport=httpx.MockTransport(handler))
    out = io.StringIO()
    assert watch_documents(client, "5", out, reconnect=False) == codes.OK
    assert paths == ["/api/v1/knowledge/corpora/5/documents:watch"]
    assert out.getvalue().splitlines() == [
        "document_id\tstate\tstage\tchunks\tfilename",
        "1\tsearchable\tsearchable\t3\t1.md",
        "2\tqueued\tqueued\t0\t2.md",
        "2\tembedding\tembedding 2/4\t0\t2.md",
        "2\tsearchable\tsearchable\t4\t2.md",
        "1\tremoved",
    ]
    redrawn = io.StringIO()
    watch_documents(client, "5", redrawn, redraw=True, reconnect=False)
    last = redrawn.getvalue().rsplit("\x1b[H\x1b[J", 1)[1]  # a terminal: the whole list drawn again each time
    assert last.splitlines() == ["document_id\tstate\tstage\tchunks\tfilename", "2\tsearchable\tsearchable\t4\t2.md"]
    as_json = io.StringIO()
    watch_documents(client, "5", as_json, as_json=True, reconnect=False)
    assert [json.loads(line) for line in as_json.getvalue().splitlines()] == WATCH_LINES


def test_a_watch_the_server_ends_is_started_again(capsys):
    from knowledge_cli.documents import watch_documents

    calls, slept = [], []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) > 2:
            return httpx.Response(404, json=status(5, "corpus not found", "CORPUS_NOT_FOUND"))
        return httpx.Response(200, content=(json.dumps(WATCH_LINES[1]) + "\n").encode())

    client = Client("http://gw/api/v1/knowledge", "t", transport=httpx.MockTransport(handler))
    with pytest.raises(ApiError) as raised:
        watch_documents(client, "5", io.StringIO(), sleep=slept.append)
    assert len(calls) == 3 and len(slept) == 2 and raised.value.exit_code == codes.NOT_FOUND


def test_a_refusal_is_told_in_plain_words(knowledge, capsys):
    from knowledge_runtime.refusals import REFUSALS, Refusal

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, json=status(14, "the embedder is unavailable", "RUNTIME_UNAVAILABLE"))

    run = knowledge(handler)
    assert run("search", "vacation") == codes.FAILED
    err = capsys.readouterr().err
    assert "the embedder is unavailable (HTTP 503 RUNTIME_UNAVAILABLE)" in err
    assert f"knowledge: {REFUSALS[Refusal.RUNTIME_UNAVAILABLE].plain}\n" in err
    assert ApiError("x", codes.USAGE, reason="CORPUS_NOT_FOUND").refusal_words == ""


def test_processing_results_follow_every_page():
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(dict(request.url.params))
        token = request.url.params.get("page_token", "")
        if not token:
            return httpx.Response(200, json={"results": [{"n": i} for i in range(100)], "next_page_token": "p2"})
        return httpx.Response(200, json={"results": [{"n": 100}], "next_page_token": ""})

    results = Client("http://gw", "t", transport=httpx.MockTransport(handler)).processing_results("d/1")
    assert [r["n"] for r in results] == list(range(101))
    assert seen == [{"page_size": "100"}, {"page_size": "100", "page_token": "p2"}]


class _CutMidStream(httpx.SyncByteStream):
    """A watch body that sends one change, then breaks as a dying ingest does."""

    def __iter__(self):
        yield (json.dumps(WATCH_LINES[1]) + "\n").encode()
        raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")


def test_a_watch_cut_mid_stream_is_started_again(capsys):
    from knowledge_cli.documents import watch_documents

    calls, slept = [], []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) > 2:
            return httpx.Response(404, json=status(5, "corpus not found", "CORPUS_NOT_FOUND"))
        return httpx.Response(200, stream=_CutMidStream())

    client = Client("http://gw/api/v1/knowledge", "t", transport=httpx.MockTransport(handler))
    with pytest.raises(ApiError) as raised:
        watch_documents(client, "5", io.StringIO(), sleep=slept.append)
    assert len(calls) == 3 and len(slept) == 2 and raised.value.exit_code == codes.NOT_FOUND
    assert capsys.readouterr().err.count("watching again") == 2


def test_a_watch_of_an_unreachable_gateway_is_not_waited_out():
    from knowledge_cli.documents import watch_documents

    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    client = Client("http://gw/api/v1/knowledge", "t", transport=httpx.MockTransport(handler))
    with pytest.raises(ApiError) as raised:
        watch_documents(client, "5", io.StringIO(), sleep=lambda _: None)
    assert raised.value.exit_code == codes.UNREACHABLE


def test_a_platform_wide_corpus_is_asked_for_only_when_named():
    bodies = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(200, json={"corpusId": "7"})

    client = Client("http://gw", "t", transport=httpx.MockTransport(handler))
    client.create_corpus("handbook", platform_wide=True)
    client.create_corpus("notes")
    assert bodies == [
        {"name": "handbook", "description": "", "platformWide": True},
        {"name": "notes", "description": ""},
    ]


def test_passages_index_remove_and_check_send_the_documented_bodies(knowledge, capsys, tmp_path):
    sent: list[tuple[str, dict]] = []
    polls = iter(["DOCUMENT_STATE_EMBEDDING", "DOCUMENT_STATE_SEARCHABLE"])

    def handler(request: httpx.Request) -> httpx.Response:
        path = request.url.path.removeprefix("/api/v1/knowledge")
        if request.method == "POST":
            sent.append((path, json.loads(request.content)))
        if path == "/passages:index":
            return httpx.Response(200, json={"job_id": "j1", "document_id": "7", "state": "DOCUMENT_STATE_QUEUED"})
        if path.startswith("/ingest/"):
            return httpx.Response(200, json={"job_id": "j1", "state": next(polls), "stage": "x", "progress": 0.5})
        if path == "/passages:remove":
            return httpx.Response(200, json={"removed": 1})
        return httpx.Response(
            200,
            json={"admitted": False, "reason": "REFUSAL_REASON_QUOTA_EXHAUSTED", "message": "max_chunks is used up"},
        )

    version = {"document_ref": "p/42/a.pdf", "content_sha256": "a" * 64, "passages": [{"fragment": "#p1", "text": "x"}]}
    (tmp_path / "a.json").write_text(json.dumps(version))
    run = knowledge(handler)
    assert run("passages", "index", str(tmp_path / "a.json"), "--corpus-key", "projects/42") == codes.OK
    assert capsys.readouterr().out == "7\tsearchable\tp/42/a.pdf\n"
    assert run("passages", "remove", "--corpus-key", "projects/42", "--ref", "p/42/a.pdf") == codes.OK
    assert run("passages", "check", "--corpus", "3", "--bytes", "100", "--passages", "2") == codes.FAILED
    assert "QUOTA_EXHAUSTED" in capsys.readouterr().out
    assert sent == [
        ("/passages:index", {**version, "corpus_key": "projects/42"}),
        ("/passages:remove", {"corpus_key": "projects/42", "document_ref": "p/42/a.pdf"}),
        ("/passages:check", {"corpus_id": "3", "bytes": "100", "passages": 2}),
    ]


def test_webhooks_commands_call_their_routes_and_show_the_secret_once(knowledge, capsys):
    seen = []
    hook = {"webhook_id": "4", "state": "WEBHOOK_STATE_ACTIVE", "cursor": "12", "url": "https://h.example/in"}

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, request.url.path.removeprefix("/api/v1/knowledge"), request.content))
        if request.url.path.endswith("/webhooks") and request.method == "POST":
            return httpx.Response(200, json={"webhook": hook, "secret": "whsec_abc"})
        if request.url.path.endswith("/deliveries"):
            attempt = {"cursor": "13", "type": "corpus.created", "attempt": 2, "status_code": 0, "error": "no answer"}
            return httpx.Response(200, json={"deliveries": [attempt]})
        if request.method == "GET" and request.url.path.endswith("/webhooks"):
            return httpx.Response(200, json={"webhooks": [hook], "next_page_token": ""})
        return httpx.Response(200, json={"webhook": {**hook, "state": "WEBHOOK_STATE_PAUSED"}, "webhook_id": "4"})

    run = knowledge(handler)
    created = ("webhooks", "create", "https://h.example/in", "--types", "corpus.created, document.searchable")
    assert run(*created, "--url", "http://gw/api/v1/knowledge") == 0
    assert str(seen[-1][1]) == "/webhooks"  # the endpoint is the body's, --url the gateway's
    out = capsys.readouterr().out
    assert out == "4\tactive\t12\t*\thttps://h.example/in\nsecret\twhsec_abc\t(shown only now: keep it)\n"
    assert json.loads(seen[-1][2])["event_types"] == ["corpus.created", "document.searchable"]
    assert run("webhooks", "pause", "4") == 0 and capsys.readouterr().out.startswith("4\tpaused\t")
    assert seen[-1][:2] == ("PATCH", "/webhooks/4")
    assert json.loads(seen[-1][2]) == {"webhook": {"state": "WEBHOOK_STATE_PAUSED"}}
    assert run("webhooks", "replay", "4", "--after", "7") == 0
    assert seen[-1][:2] == ("POST", "/webhooks/4:replay") and json.loads(seen[-1][2]) == {"after": "7"}
    assert run("webhooks", "rotate", "4", "--grace-seconds", "60") == 0
    assert seen[-1][:2] == ("POST", "/webhooks/4:rotateSecret") and json.loads(seen[-1][2]) == {"grace_seconds": 60}
    capsys.readouterr()
    assert run("webhooks", "deliveries", "4") == 0
    assert capsys.readouterr().out.splitlines()[1].split("\t")[1:5] == ["13", "corpus.created", "2", "-"]
    assert run("webhooks", "list") == 0 and "https://h.example/in" in capsys.readouterr().out
    assert run("webhooks", "delete", "4") == 0 and seen[-1][:2] == ("DELETE", "/webhooks/4")
