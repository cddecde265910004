"""Every endpoint through the gateway, for the owner and for another tenant: corpora, uploads
(raw and multipart) and their jobs, search, query, text, delete and tombstones, batches of texts,
OCR, web pages by URL, unknown paths and bad input."""

from __future__ import annotations

import httpx
import pytest

from tests.support.gateway_api import SEARCHABLE, auth
from tests.support.stack import wait_for_job

pytestmark = pytest.mark.e2e


def test_corpora_create_list_and_duplicate_409(stack, handbook):
    headers, corpus = handbook["headers"], handbook["corpus"]
    assert corpus["name"] == "Handbook" and isinstance(corpus["corpus_id"], str)
    duplicate = httpx.post(f"{stack['base']}/corpora", json={"name": "Handbook"}, headers=headers)
    assert duplicate.status_code == 409
    assert duplicate.json()["details"][0]["reason"] == "CORPUS_ALREADY_EXISTS"
    [listed] = [
        c
        for c in httpx.get(f"{stack['base']}/corpora", headers=headers).json()["corpora"]
        if c["corpus_id"] == corpus["corpus_id"]
    ]
    assert listed["document_count"] == 1 and listed["chunk_count"] >= 1


def test_upload_job_progress_and_a_result_delivered_once(stack, handbook):
    assert handbook["upload"]["status"] == "ingesting" and handbook["upload"]["filename"] == "handbook.md"
    progress = [p["progress"] for p in handbook["polls"]]
    assert progress == sorted(progress) and progress[-1] == 1.0
    assert handbook["polls"][-1]["stage"] == "searchable"
    with_result = [p for p in handbook["polls"] if p.get("result")]
    assert len(with_result) == 1 and with_result[0]["result"]["chunk_count"] >= 1
    again = httpx.get(f"{stack['base']}/ingest/{handbook['upload']['job_id']}", headers=handbook["headers"]).json()
    assert again["state"] == SEARCHABLE and not again.get("result")


def test_multipart_upload_from_a_browser_form(stack, handbook):
    reply = httpx.post(
        f"{stack['base']}/upload",
        headers=handbook["headers"],
        data={"corpus_id": handbook["corpus"]["corpus_id"]},
        files={"file": ("notes.txt", b"The canteen opens at eight.\n", "text/plain")},
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["filename"] == "notes.txt"
    job, _ = wait_for_job(stack["base"], handbook["headers"], reply.json()["job_id"])
    assert job["state"] == SEARCHABLE


def test_search_query_text_and_delete(stack, token, handbook):
    base, headers, document_id = stack["base"], handbook["headers"], handbook["document_id"]
    found = httpx.post(f"{base}/search", json={"query": "quokka mentoring program", "top_k": 3}, headers=headers)
    assert found.status_code == 200
    results = found.json()["results"]
    assert results and results[0]["document_id"] == document_id and "quokka" in results[0]["content"].lower()
    assert results[0]["filename"] == "handbook.md"
    answer = httpx.post(
        f"{base}/query", json={"query": "How many days of paid vacation does an employee get?"}, headers=headers
    )
    assert answer.status_code == 200, answer.text
    cited = answer.json()
    assert cited["answer"] and cited["citations"]
    assert {c["document_id"] for c in cited["citations"]} == {document_id}
    text = httpx.get(f"{base}/documents/{document_id}/text", headers=headers)
    assert text.status_code == 200 and "quokka mentoring" in text.json()["text"].lower()
    assert httpx.get(f"{base}/documents/{document_id}/text", params={"page": 99}, headers=headers).status_code == 400
    # Another tenant sees none of it: 404, never 403, and no results.
    other = auth(token("globex"))
    assert httpx.get(f"{base}/documents/{document_id}/text", headers=other).status_code == 404
    assert httpx.delete(f"{base}/documents/{document_id}", headers=other).status_code == 404
    assert httpx.get(f"{base}/ingest/{handbook['upload']['job_id']}", headers=other).status_code == 404
    into = httpx.post(
        f"{base}/upload",
        params={"corpus_id": handbook["corpus"]["corpus_id"], "filename": "x.txt"},
        content=b"intrusion",
        headers=other,
    )
    assert into.status_code == 404
    assert httpx.post(f"{base}/search", json={"query": "quokka"}, headers=other).json()["results"] == []
    # The owner deletes it; then it is gone, from search too, and its tombstone says what it was.
    deleted = httpx.delete(f"{base}/documents/{document_id}", params={"reason": "outdated"}, headers=headers)
    assert deleted.status_code == 200 and deleted.json()["deleted_chunk_count"] >= 1
    tombstone = deleted.json()["tombstone"]
    assert (tombstone["document_id"], tombstone["filename"], tombstone["reason"]) == (
        document_id,
        "handbook.md",
        "outdated",
    )
    missing = httpx.get(f"{base}/documents/{document_id}/text", headers=headers)
    assert missing.status_code == 404 and missing.json()["details"][0]["reason"] == "DOCUMENT_NOT_FOUND"
    assert httpx.delete(f"{base}/documents/{document_id}", headers=headers).status_code == 404
    gone = httpx.post(f"{base}/search", json={"query": "quokka mentoring program"}, headers=headers)
    assert document_id not in {r["document_id"] for r in gone.json()["results"]}
    # GET /tombstones needs audit.read (not in a default token); another tenant's auditor sees none.
    assert httpx.get(f"{base}/tombstones", headers=headers).status_code == 403
    audit = httpx.get(f"{base}/tombstones", headers=auth(token("acme", capabilities=["audit.read"])))
    assert audit.status_code == 200, audit.text
    assert [t["document_id"] for t in audit.json()["tombstones"]] == [document_id]
    elsewhere = httpx.get(f"{base}/tombstones", headers=auth(token("globex", capabilities=["audit.read"])))
    assert elsewhere.status_code == 200 and not elsewhere.json().get("tombstones")


def test_a_corpus_is_deleted_over_rest_only_when_asked_to_take_its_documents(stack, token):
    base, headers = stack["base"], auth(token("corpus-deleter"))
    corpus_id = httpx.post(f"{base}/corpora", json={"name": "Old"}, headers=headers).json()["corpus_id"]
    upload = httpx.post(
        f"{base}/upload",
        params={"corpus_id": corpus_id, "filename": "old.md"},
        content=b"# Old\n\nOld news.",
        headers=headers,
    )
    job, _ = wait_for_job(base, headers, upload.json()["job_id"])
    assert job["state"] == SEARCHABLE
    refused = httpx.delete(f"{base}/corpora/{corpus_id}", headers=headers)
    assert refused.status_code == 400 and refused.json()["details"][0]["reason"] == "CORPUS_NOT_EMPTY"
    assert httpx.delete(f"{base}/corpora/{corpus_id}", headers=auth(token("globex"))).status_code == 404
    deleted = httpx.delete(f"{base}/corpora/{corpus_id}", params={"delete_documents": "true"}, headers=headers)
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["deleted_document_count"] == 1
    assert deleted.json()["tombstones"][0]["document_id"] == job["result"]["document_id"]
    assert not httpx.get(f"{base}/corpora", headers=headers).json().get("corpora")
    assert httpx.get(f"{base}/documents/{job['result']['document_id']}", headers=headers).status_code == 404


def test_texts_in_a_batch_and_a_text_bound_to_a_document(stack, token):
    base, headers = stack["base"], auth(token("batcher"))
    corpus_id = httpx.post(f"{base}/corpora", json={"name": "Catalog"}, headers=headers).json()["corpus_id"]
    items = [
        {"corpus_id": corpus_id, "text": f"Catalog entry {i}: the {colour} enamel kettle.", "title": f"entry {i}"}
        for i, colour in enumerate(("blue", "red", "white"))
    ] + [{"corpus_id": "999999999", "text": "Lost."}]
    reply = httpx.post(f"{base}/texts:batch", json={"items": items}, headers=headers)
    assert reply.status_code == 200, reply.text
    answer = reply.json()
    assert answer["accepted_count"] == 3 and answer["rejected_count"] == 1
    assert answer["items"][3]["error_reason"] == "CORPUS_NOT_FOUND" and "job" not in answer["items"][3]
    blank = httpx.post(
        f"{base}/texts:batch", json={"items": [items[0], {"corpus_id": corpus_id, "text": " "}]}, headers=headers
    )  # a malformed item refuses the whole batch
    assert blank.status_code == 400 and blank.json()["details"][0]["metadata"]["field"] == "items[1].text"
    jobs = [wait_for_job(base, headers, item["job"]["job_id"])[1] for item in answer["items"][:3]]
    results = [next(p["result"] for p in polls if p.get("result")) for polls in jobs]
    assert len({r["document_id"] for r in results}) == 3
    too_many = httpx.post(f"{base}/texts:batch", json={"items": [items[0]] * 1001}, headers=headers)
    assert too_many.status_code == 400 and too_many.json()["details"][0]["reason"] == "INVALID_REQUEST"
    # the text of a document replaced through ingest, the only writer of chunks
    document_id = results[0]["document_id"]
    bound = httpx.post(
        f"{base}/texts",
        json={"document_id": document_id, "text": "# Entry 0\n\nThe green cast-iron kettle replaced it."},
        headers=headers,
    )
    assert bound.status_code == 200, bound.text
    job, polls = wait_for_job(base, headers, bound.json()["job_id"])
    result = next(p["result"] for p in polls if p.get("result"))
    assert job["state"] == SEARCHABLE and result["document_id"] == document_id and result["re_extracted"]
    text = httpx.get(f"{base}/documents/{document_id}/text", headers=headers).json()["text"]
    assert "green cast-iron kettle" in text and "blue enamel" not in text


def test_a_scanned_pdf_is_read_by_ocr_and_found_on_its_page(stack, handbook):
    from tests.support.documents import PUMPS, VALVES, scanned_pdf

    base, headers = stack["base"], handbook["headers"]
    upload = httpx.post(
        f"{base}/upload",
        params={"corpus_id": handbook["corpus"]["corpus_id"], "filename": "scan.pdf"},
        content=scanned_pdf([PUMPS, VALVES]),
        headers={**headers, "Content-Type": "application/pdf"},
    )
    assert upload.status_code == 200, upload.text
    job, polls = wait_for_job(base, headers, upload.json()["job_id"])
    assert job["state"] == SEARCHABLE, job
    result = next(p["result"] for p in polls if p.get("result"))
    assert int(result["chunk_count"]) >= 2 and any("read by OCR" in w for w in result["warnings"])
    found = httpx.post(
        f"{base}/search", json={"query": "valves replaced autumn maintenance window", "top_k": 3}, headers=headers
    ).json()["results"]
    assert found[0]["document_id"] == result["document_id"] and found[0]["page"] == 2
    assert "Valves older than twelve years" in found[0]["content"]


def test_a_web_page_by_url_is_searchable_and_cited_with_its_source_url(stack, handbook, site, token):
    base, headers = stack["base"], handbook["headers"]
    corpus_id = handbook["corpus"]["corpus_id"]
    reply = httpx.post(f"{base}/urls", json={"url": site.url("/pumps"), "corpus_id": corpus_id}, headers=headers)
    assert reply.status_code == 200, reply.text
    # the source_url as asked: the fetch (and its redirects) is the job's first stage
    assert reply.json()["source_url"] == site.url("/pumps") and reply.json()["status"] == "ingesting"
    job, polls = wait_for_job(base, headers, reply.json()["job_id"])
    assert job["state"] == SEARCHABLE, job
    document_id = next(p["result"]["document_id"] for p in polls if p.get("result"))
    found = httpx.post(
        f"{base}/search", json={"query": "operations desk extension 4471 weekdays", "top_k": 3}, headers=headers
    ).json()["results"]
    assert found[0]["document_id"] == document_id and found[0]["source_url"] == site.url("/guide.html")
    answer = httpx.post(
        f"{base}/query", json={"query": "At which extension is the operations desk?"}, headers=headers
    ).json()
    cited = [c for c in answer["citations"] if c["document_id"] == document_id]
    assert cited and all(c["source_url"] == site.url("/guide.html") for c in cited)
    assert httpx.get(f"{base}/documents/{document_id}", headers=headers).json()["source_url"] == site.url("/guide.html")
    # Fenced: a loopback address the setting does not allow, and a non-http scheme, are 400 with the reason.
    for url in (f"http://localhost:{site.port}/guide.html", "file:///etc/passwd"):
        refused = httpx.post(f"{base}/urls", json={"url": url, "corpus_id": corpus_id}, headers=headers)
        assert refused.status_code == 400 and refused.json()["details"][0]["reason"] == "URL_REFUSED", refused.text
    assert (
        httpx.post(
            f"{base}/urls", json={"url": site.url("/guide.html"), "corpus_id": corpus_id}, headers=auth(token("globex"))
        ).status_code
        == 404
    )  # another tenant's corpus


def test_unknown_paths_and_bad_input_are_4xx_json(stack, token):
    headers = auth(token("acme"))
    unknown = httpx.get(f"{stack['base']}/nothing-here", headers=headers)
    assert unknown.status_code == 404 and unknown.json()["code"] == 12  # UNIMPLEMENTED: no such call
    assert unknown.json()["details"][0]["reason"] == "METHOD_NOT_FOUND"
    bad = httpx.get(f"{stack['base']}/corpora", params={"bogus": "1"}, headers=headers)
    assert bad.status_code == 400 and bad.headers["content-type"] == "application/json"
    assert httpx.post(f"{stack['base']}/search", content=b"{not json", headers=headers).status_code == 400
    wrong_method = httpx.put(f"{stack['base']}/corpora", json={}, headers=headers)
    assert wrong_method.status_code == 405 and wrong_method.headers["allow"] == "GET, POST"
    assert wrong_method.json()["details"][0]["reason"] == "METHOD_NOT_ALLOWED"
    custom = httpx.request("PURGE", f"{stack['base']}/documents/7/text", headers=headers)
    assert custom.status_code == 405 and custom.headers["allow"] == "GET"
