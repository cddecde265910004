"""The structural chunker, counting in characters (in a model's tokens: test_chunk_tokens.py)."""

import itertools
import re

import pytest
from knowledge_runtime.chunking import ChunkSize, split_structural


def paragraphs(n: int, words: int = 60, tag: str = "p") -> str:
    return "\n\n".join(" ".join(f"{tag}{i}w{j}" for j in range(words)) + "." for i in range(n))


def reassemble(chunks) -> str:
    return "\n\n".join(c.content[c.overlap_chars :] for c in chunks)


def test_headings_and_pages_set_section_and_page():
    text = "Preface text.\n\n# Intro\n\nHello world.\n\n[Page 2]\n\nStill intro.\n\n## Details\n\nMore here."
    chunks = split_structural(text)
    assert [(c.section, c.page) for c in chunks] == [("", None), ("Intro", None), ("Intro", 2), ("Details", 2)]
    assert chunks[1].content == "# Intro\n\nHello world."
    assert chunks[2].content == "Still intro."
    assert [c.chunk_index for c in chunks] == [0, 1, 2, 3]
    assert all("[Page" not in c.content for c in chunks)


def test_sheets_are_sections():
    text = "[Sheet: Budget]\n| a | b |\n| --- | --- |\n| 1 | 2 |\n\n[Sheet: Staff]\n| n |\n| --- |\n| x |"
    chunks = split_structural(text)
    assert [c.section for c in chunks] == ["Budget", "Staff"]
    assert chunks[0].content.startswith("| a | b |")


def test_heading_only_sections_are_carried_into_the_next():
    chunks = split_structural("# Annual report\n\n## Summary\n\nRevenue grew.")
    assert len(chunks) == 1
    assert chunks[0].section == "Summary"
    assert chunks[0].content == "# Annual report\n\n## Summary\n\nRevenue grew."


def test_an_oversize_section_splits_on_paragraphs_with_overlap():
    body = paragraphs(12)
    chunks = split_structural("# Big\n\n" + body, max_chars=1200)
    assert len(chunks) > 2
    assert all(len(c.content) <= 1200 for c in chunks)
    assert all(c.section == "Big" for c in chunks)
    for before, after in itertools.pairwise(chunks):
        last_paragraph = before.content.split("\n\n")[-1]
        assert after.content.startswith(last_paragraph)  # one paragraph of overlap
        assert after.overlap_chars == len(last_paragraph) + 2
    assert reassemble(chunks) == "# Big\n\n" + body


def test_an_oversize_paragraph_splits_on_lines_first():
    lines = "\n".join(f"line {i} " + "x" * 80 for i in range(40))
    chunks = split_structural(lines, max_chars=1000)
    assert all(len(c.content) <= 1000 for c in chunks)
    for chunk in chunks:  # every piece ends on a line boundary
        assert all(re.fullmatch(r"line \d+ x{80}", line) for line in chunk.content.split("\n") if line)


def test_a_single_huge_line_still_fits():
    text = ("word " * 3000).strip()
    chunks = split_structural(text, max_chars=500)
    assert chunks and all(len(c.content) <= 500 for c in chunks)
    assert sum(c.content.count("word") for c in chunks) >= 3000


def table(rows: int) -> str:
    lines = ["| Name | Amount | Note |", "| --- | --- | --- |"]
    lines += [f"| item {i} | {i * 10} | note for item {i} |" for i in range(rows)]
    return "\n".join(lines)


def test_a_table_that_fits_stays_in_one_chunk_with_its_caption():
    text = paragraphs(3) + "\n\nTable 1: Costs\n\n" + table(10) + "\n\nAfter the table."
    chunks = split_structural(text, max_chars=1200)
    holding = [c for c in chunks if "| Name | Amount | Note |" in c.content]
    assert len(holding) == 1
    assert "| item 9 |" in holding[0].content
    assert "Table 1: Costs\n\n| Name" in holding[0].content


def test_every_piece_of_a_split_table_repeats_the_header():
    chunks = split_structural("## Ledger\n\n" + table(200), max_chars=1000)
    pieces = [c for c in chunks if "| item" in c.content]
    assert len(pieces) > 3
    rows_seen = []
    for piece in pieces:
        assert len(piece.content) <= 1000
        lines = [line for line in piece.content.split("\n") if line.startswith("|")]
        assert lines[0] == "| Name | Amount | Note |" and lines[1] == "| --- | --- | --- |"
        rows_seen += [line for line in lines[2:]]
    assert len(rows_seen) == 200 and len(set(rows_seen)) == 200  # no row lost, none repeated


def test_empty_and_whitespace_text_gives_no_chunks():
    assert split_structural("") == []
    assert split_structural("\n\n  \n[Page 1]\n\n") == []


def test_max_chars_is_validated():
    with pytest.raises(ValueError):
        split_structural("x", max_chars=10)


class Undercounting:
    """A measure whose sizes of joined texts are too low (as a tokenizer's estimate may be): the
    chunker must still never return a chunk over the limit."""

    smallest = 20
    exact = False  # so the chunker asks again for each chunk whole

    def size(self, text: str) -> int:
        return len(text)

    def sizes(self, texts) -> list[int]:
        return [len(text) for text in texts]

    def joined(self, sizes, separator: str) -> int:
        return sum(sizes) // 2

    def split(self, text: str, limit: int) -> list[str]:
        return [text[start : start + limit] for start in range(0, len(text), limit)]


def test_every_chunk_is_measured_whole_so_an_estimate_never_lets_one_exceed_the_limit():
    text = paragraphs(12, words=10)
    chunks = split_structural(text, size=ChunkSize(120, Undercounting()))
    assert chunks and max(len(c.content) for c in chunks) <= 120
    assert [c.chunk_index for c in chunks] == list(range(len(chunks)))
    # Nothing lost: the estimate put paragraphs together beyond the limit, the check cut them.
    assert "".join(reassemble(chunks).split()) == "".join(text.split())


def test_a_headings_only_document_is_cut_to_the_limit_between_words_and_loses_nothing():
    text = "# " + "heading words " * 40
    chunks = split_structural(text, max_chars=200)
    assert len(chunks) > 1 and all(len(c.content) <= 200 and c.content.endswith("words") for c in chunks)
    assert " ".join(c.content for c in chunks).split() == text.split()
