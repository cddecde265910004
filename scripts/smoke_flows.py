"""What `make images-smoke` does through the gateway once the pods are ready, as a user would.

``user_flow``: a corpus, a PDF and a DOCX uploaded until SEARCHABLE, search, query, text,
delete. ``replica_flow`` (``--replicas 2``): every upload processed exactly once across the
ingest replicas, both search replicas answering, and an ingest replica killed mid-job losing
nothing.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import time
from collections import Counter
from pathlib import Path

from smoke_cluster import BIN, Cluster, podman, sh


def sample_files(work: Path, word: str) -> tuple[Path, Path]:
    import docx
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("helvetica", size=11)
    for page in range(2):
        pdf.add_page()
        pdf.multi_cell(
            0,
            6,
            f"The {word} maintenance manual, page {page + 1}. Lubricate the {word} bearings "
            f"every ninety days and record the torque of each bolt.",
        )
    pdf_path = work / f"{word}-manual.pdf"
    pdf_path.write_bytes(bytes(pdf.output()))
    document = docx.Document()
    document.add_heading("Travel policy", 1)
    document.add_paragraph(
        f"Employees travelling to {word}ville book economy class and file receipts within thirty days of return."
    )
    buffer = io.BytesIO()
    document.save(buffer)
    docx_path = work / f"{word}-policy.docx"
    docx_path.write_bytes(buffer.getvalue())
    return pdf_path, docx_path


def token(work: Path, tenant: str) -> str:
    """`knowledge dev-token`: a token signed with the development key the pods' JWKS holds."""
    env = {**os.environ, "KNOWLEDGE_DATA_DIR": str(work / "data")}
    return subprocess.run(
        [str(BIN / "knowledge"), "dev-token", "--tenant", tenant], env=env, capture_output=True, check=True, text=True
    ).stdout.strip()


def retrying(call, retried: list[str] | None, timeout_s: float = 60):
    """A call that a replica's crash may answer 503 (the gateway still resolves the dead pod
    until its DNS entry goes), retried as a client would; each retry is recorded."""
    from knowledge_cli.client import ApiError

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return call()
        except ApiError as error:
            if retried is None or error.status != 503 or time.monotonic() > deadline:
                raise
            retried.append(error.reason or "503")
            time.sleep(1)


def wait_jobs(client, job_ids: list[str], timeout_s: float, retried: list[str] | None = None) -> dict[str, dict]:
    finals: dict[str, dict] = {}
    deadline = time.monotonic() + timeout_s
    while len(finals) < len(job_ids) and time.monotonic() < deadline:
        for job_id in job_ids:
            if job_id not in finals:
                job = retrying(lambda: client.job(job_id), retried)  # noqa: B023
                if job["state"] in ("DOCUMENT_STATE_SEARCHABLE", "DOCUMENT_STATE_FAILED", "DOCUMENT_STATE_CANCELLED"):
                    finals[job_id] = job
        time.sleep(1)
    return finals


def user_flow(cluster: Cluster, port: int) -> None:
    from knowledge_cli.client import ApiError, Client

    summary = cluster.summary
    base = f"http://127.0.0.1:{port}/api/v1/knowledge"
    word = "zeppelin"
    pdf_path, docx_path = sample_files(cluster.work, word)
    with Client(base, token(cluster.work, "smoke")) as client:
        corpus = client.create_corpus("smoke", "images smoke")
        summary.must(bool(corpus.get("corpus_id")), "create a corpus", corpus.get("corpus_id", ""))
        handles = {p.suffix: client.upload(p, corpus["corpus_id"]) for p in (pdf_path, docx_path)}
        summary.must(all(h.get("job_id") for h in handles.values()), "upload a PDF and a DOCX")
        finals = wait_jobs(client, [h["job_id"] for h in handles.values()], 300)
        states = {suffix: finals.get(h["job_id"], {}).get("state", "not finished") for suffix, h in handles.items()}
        summary.must(
            all(s == "DOCUMENT_STATE_SEARCHABLE" for s in states.values()), "both become SEARCHABLE", str(states)
        )
        documents = {suffix: finals[h["job_id"]]["result"]["document_id"] for suffix, h in handles.items()}
        hits = client.search(f"{word} bearings torque", corpus_id=corpus["corpus_id"]).get("results", [])
        found = {hit.get("document_id") for hit in hits}
        summary.check(documents[".pdf"] in found, "search finds the PDF", f"{len(hits)} results")
        hits = client.search(f"travel to {word}ville economy class", corpus_id=corpus["corpus_id"]).get("results", [])
        summary.check(
            documents[".docx"] in {hit.get("document_id") for hit in hits},
            "search finds the DOCX",
            f"{len(hits)} results",
        )
        answer = client.query(f"How often are the {word} bearings lubricated?", corpus_id=corpus["corpus_id"])
        summary.check(
            bool(answer.get("answer")) and bool(answer.get("citations")),
            "query answers with citations",
            f"{len(answer.get('citations', []))} citations",
        )
        text = client.document_text(documents[".pdf"])
        summary.check(f"Lubricate the {word} bearings" in json.dumps(text), "read the PDF's text")
        text = client.document_text(documents[".docx"])
        summary.check(f"{word}ville" in json.dumps(text), "read the DOCX's text")
        client.delete_document(documents[".pdf"])
        try:
            client.document_text(documents[".pdf"])
            gone = False
        except ApiError as error:
            gone = error.status == 404
        hits = client.search(f"{word} bearings torque", corpus_id=corpus["corpus_id"]).get("results", [])
        summary.check(
            gone and documents[".pdf"] not in {h.get("document_id") for h in hits},
            "delete: the text is 404 and search no longer finds it",
        )


def job_events(log: str, counted: bool = False) -> dict:
    """job ids per event (extraction_done, document_ingested) of an ingest container's JSON log."""
    events: dict = {"extraction_done": [] if counted else set(), "document_ingested": [] if counted else set()}
    for line in log.splitlines():
        if line.startswith("{") and '"job_id"' in line:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("event") in events:
                add = events[record["event"]].append if counted else events[record["event"]].add
                add(record["job_id"])
    return events


def replica_flow(cluster: Cluster, port: int, uploads: int) -> None:
    """Exactly-once processing across the ingest replicas, a killed replica losing nothing, and
    searches answered by every search replica."""
    from knowledge_cli.client import Client

    summary = cluster.summary
    base = f"http://127.0.0.1:{port}/api/v1/knowledge"
    ingest = [f"{pod}-ingest" for pod in cluster.pods["knowledge-ingest"]]
    search = [f"{pod}-search" for pod in cluster.pods["knowledge-search"]]
    import docx

    retried: list[str] = []
    with Client(base, token(cluster.work, "replicas")) as client:
        corpus = client.create_corpus("replicas", "")["corpus_id"]
        jobs = []
        for i in range(uploads):
            document = docx.Document()
            for paragraph in range(12):
                document.add_paragraph(
                    f"Replica document {i} (code rx{i:03d}q), paragraph {paragraph}: "
                    "the quarterly report covers inventory, shipping and returns. " * 3
                )
            path = cluster.work / f"replica-{i:03d}.docx"
            document.save(path)
            jobs.append(retrying(lambda path=path: client.upload(path, corpus), retried)["job_id"])
            if i == uploads // 2:
                # Kill one ingest replica mid-job (SIGKILL, as a node loss or the OOM killer would):
                # once it has finished a job and extracted one it has not finished.
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:
                    log = job_events(cluster.logs(ingest[0]))
                    in_flight = log["extraction_done"] - log["document_ingested"]
                    if log["document_ingested"] and in_flight:
                        break
                    time.sleep(0.2)
                pid = json.loads(podman("inspect", ingest[0]).stdout)[0]["State"]["Pid"]
                sh("kill", "-KILL", str(pid))
                summary.check(
                    bool(in_flight),
                    f"killed {ingest[0]} mid-job",
                    f"pid {pid}, {len(in_flight)} job(s) extracted and not finished",
                )
        # Kubernetes restarts the killed container (restartPolicy Always); podman does too.
        finals = wait_jobs(client, jobs, 900, retried)
        summary.check(
            True,
            "calls answered 503 while the killed pod was still in the gateway's DNS, retried",
            f"{len(retried)}: {sorted(set(retried))}",
        )
        states = Counter(job["state"] for job in finals.values())
        summary.check(
            len(finals) == uploads and states["DOCUMENT_STATE_SEARCHABLE"] == uploads,
            f"all {uploads} uploads SEARCHABLE after the kill",
            str(dict(states)),
        )
        restarts = json.loads(podman("inspect", ingest[0]).stdout)[0].get("RestartCount", 0)
        summary.check(restarts >= 1, f"{ingest[0]} restarted after the kill", f"{restarts} restart(s)")
        ingested: Counter[str] = Counter()
        per_replica: dict[str, int] = {}
        for name in ingest:
            ids = [j for j in job_events(cluster.logs(name), counted=True)["document_ingested"] if j in jobs]
            per_replica[name] = len(ids)
            ingested.update(ids)
        summary.check(
            not (in_flight - set(ingested)),
            "the killed replica's jobs were finished by a replica",
            f"{len(in_flight & set(ingested))} of {len(in_flight)}",
        )
        twice = [job for job, n in ingested.items() if n > 1]
        summary.check(
            len(ingested) == uploads and not twice,
            "each upload processed exactly once across the ingest replicas",
            f"per replica {per_replica}, {len(twice)} twice, {uploads - len(ingested)} never",
        )
        documents = {finals[j]["result"]["document_id"] for j in jobs if j in finals}
        summary.check(len(documents) == uploads, "one document per upload", f"{len(documents)} documents")

        before = {name: cluster.logs(name).count('"search_done"') for name in search}
        for i in range(20):
            retrying(lambda: client.search(f"code rx{i:03d}q quarterly report", corpus_id=corpus), retried)  # noqa: B023
        answered = {name: cluster.logs(name).count('"search_done"') - before[name] for name in search}
        summary.check(
            all(n > 0 for n in answered.values()) and sum(answered.values()) >= 20,
            "searches answered by every search replica",
            str(answered),
        )
