"""``knowledge upload``: files (or web pages by URL) into a corpus, their ingestion followed.

Each job is polled until it is terminal, with one progress line per job (redrawn on a
terminal, a line per stage change otherwise); Ctrl-C leaves the jobs running unless
``--cancel-on-interrupt``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from knowledge_cli.client import FAILED, INTERRUPTED, OK, USAGE, ApiError, Client
from knowledge_cli.rest_command import print_json

TERMINAL_STATES = {"DOCUMENT_STATE_SEARCHABLE", "DOCUMENT_STATE_FAILED", "DOCUMENT_STATE_CANCELLED"}
POLL_INTERVAL_S = 0.5
BAR_WIDTH = 24


def _is_url(argument: str) -> bool:
    return argument.lower().startswith(("http://", "https://"))


def upload(client: Client, options, out: TextIO) -> int:
    for argument in options.files:
        if not _is_url(argument) and not Path(argument).is_file():
            raise ApiError(f"{argument}: no such file", USAGE)
    jobs: list[tuple[str, dict]] = []  # what each job is shown as (a file's name, a URL), its handle
    for argument in options.files:
        if _is_url(argument):
            jobs.append((argument, client.ingest_url(argument, options.corpus)))
        else:
            jobs.append((Path(argument).name, client.upload(Path(argument), options.corpus)))
        if options.no_wait or options.json:
            continue
        print(
            f"knowledge: {jobs[-1][0]} {'to be fetched' if _is_url(argument) else 'stored'}, job {jobs[-1][1]['job_id']}",
            file=sys.stderr,
        )
    if options.no_wait:
        if options.json:
            print_json(out, [handle for _, handle in jobs])
        else:
            out.writelines(f"{handle['job_id']}\t{name}\n" for name, handle in jobs)
        return OK
    try:
        finals = follow(client, [handle["job_id"] for _, handle in jobs], [name for name, _ in jobs], sys.stderr)
    except KeyboardInterrupt:
        running = [h["job_id"] for _, h in jobs]
        if options.cancel_on_interrupt:
            for job_id in running:
                try:
                    client.cancel_job(job_id)
                except ApiError:
                    pass
            print(f"knowledge: interrupted; cancelled jobs {', '.join(running)}", file=sys.stderr)
        else:
            print(f"knowledge: interrupted; jobs {', '.join(running)} go on in the background", file=sys.stderr)
        return INTERRUPTED
    if options.json:
        print_json(out, finals)
    failed = 0
    for name, job in zip((name for name, _ in jobs), finals):
        result = job.get("result") or {}
        if job["state"] == "DOCUMENT_STATE_SEARCHABLE":
            if not options.json:
                out.write(
                    f"{result.get('document_id', '')}\t{result.get('chunk_count', 0)}\t{name}\t"
                    f"{result.get('message', '')}\n"
                )
                for warning in result.get("warnings", []):  # what extraction could not read
                    print(f"knowledge: {name}: warning: {warning}", file=sys.stderr)
        else:
            failed += 1
            reason = job.get("error") or job["stage"]
            print(f"knowledge: {name}: {reason}", file=sys.stderr)
    return FAILED if failed else OK


def follow(
    client: Client,
    job_ids: list[str],
    names: list[str],
    stream: TextIO,
    *,
    interval_s: float = POLL_INTERVAL_S,
    sleep: Callable[[float], None] = time.sleep,
) -> list[dict]:
    """Polls every job until it is terminal, drawing one progress line per job; the last states.

    The first poll after completion carries the job's result (delivered once), so it is kept.
    """
    latest: dict[str, dict] = {}
    results: dict[str, dict] = {}
    drawn = 0
    tty = stream.isatty()
    printed: dict[str, str] = {}
    while True:
        for job_id in job_ids:
            if job_id in latest and latest[job_id]["state"] in TERMINAL_STATES:
                continue
            job = client.job(job_id)
            if job.get("result"):
                results[job_id] = job["result"]
            latest[job_id] = job
        lines = [progress_line(name, latest[job_id]) for job_id, name in zip(job_ids, names)]
        if tty:
            if drawn:
                stream.write(f"\x1b[{drawn}F")
            stream.write("".join(f"\x1b[2K{line}\n" for line in lines))
            drawn = len(lines)
        else:
            for job_id, line in zip(job_ids, lines):
                stage = latest[job_id]["stage"]
                if printed.get(job_id) != stage:  # a line per stage change, not per poll
                    stream.write(line + "\n")
                    printed[job_id] = stage
        stream.flush()
        if all(latest[j]["state"] in TERMINAL_STATES for j in job_ids):
            return [{**latest[j], "result": results.get(j) or latest[j].get("result")} for j in job_ids]
        sleep(interval_s)


def progress_line(name: str, job: dict) -> str:
    fraction = min(max(float(job.get("progress") or 0.0), 0.0), 1.0)
    filled = round(fraction * BAR_WIDTH)
    bar = "#" * filled + "-" * (BAR_WIDTH - filled)
    return f"[{bar}] {fraction * 100:5.1f}% {job.get('stage') or ''} {name}"
