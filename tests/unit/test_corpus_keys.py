"""Which corpus a key names for a reader: the one it reads bound nearest its node, the oldest
among equals; what a key may be."""

import pytest
from knowledge_runtime.corpus_keys import InvalidCorpusKey, check_key, resolve
from knowledge_runtime.reach import Band, Placement, Reader, ScopePath, reach

ROOT, ENG, BILLING = ScopePath(), ScopePath.parse("workspace:eng"), ScopePath.parse("workspace:eng/project:billing")
SALES = ScopePath.parse("workspace:sales")


def placed(corpus_id: int, node: ScopePath, band: Band = Band.TENANT) -> Placement:
    return Placement(corpus_id, node, band)


@pytest.mark.parametrize(
    ("reader", "keyed", "named"),
    [
        (Reader(BILLING), [placed(1, ROOT), placed(2, ENG), placed(3, BILLING)], 3),  # its own node first
        (Reader(BILLING), [placed(1, ROOT), placed(2, ENG)], 2),  # then the nearest ancestor
        (Reader(ENG), [placed(1, ROOT), placed(3, BILLING)], 1),  # a descendant's is out of reach
        (Reader(ENG), [placed(4, SALES)], None),  # a sibling's is out of reach
        (Reader(ROOT), [placed(7, ROOT), placed(5, ROOT, Band.GENERAL)], 5),  # the oldest at one node
        (Reader(ROOT), [placed(5, ROOT, Band.RESTRICTED), placed(7, ROOT)], 7),  # above its clearance
        (Reader(ROOT, Band.RESTRICTED), [placed(5, ROOT, Band.RESTRICTED), placed(7, ROOT)], 5),
        (Reader(ROOT), [], None),
    ],
)
def test_a_key_names_the_reachable_corpus_nearest_the_reader(reader, keyed, named):
    every = [placed(1, ROOT), placed(2, ENG), placed(3, BILLING), placed(4, SALES), *keyed]
    assert resolve(reach(reader, {p.corpus_id: p for p in every}.values()), keyed) == named


@pytest.mark.parametrize("key", ["projects/42/production", "a", "A.b_c:d-e/f", "9" * 200])
def test_a_key_is_letters_digits_and_a_few_separators(key):
    assert check_key(key) == key


@pytest.mark.parametrize("key", ["", "/leading", "-dash", "has space", "ümlaut", "x" * 201, "a\x00b", "a?b"])
def test_anything_else_is_no_key(key):
    with pytest.raises(InvalidCorpusKey):
        check_key(key)
