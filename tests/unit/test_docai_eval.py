"""The scoring of documents-ai's benchmark (knowledge_cli.docai_eval): field normalisation and
matching, the outcomes, the baselines, and the labelled set's manifest being scorable."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest
from knowledge_cli.docai_eval import (
    ABSENT,
    MISSED,
    RIGHT,
    SPURIOUS,
    WRONG,
    FieldSpec,
    Manifest,
    ManifestError,
    accuracy,
    field_summary,
    majority_baseline,
    normalised,
    parse_date,
    parse_number,
    quote_states,
    score_field,
)

MANIFEST = Path(__file__).resolve().parents[2] / "bench" / "data" / "docai_labels.json"


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("$4.11", 4.11),
        ("1,939.00", 1939.0),
        ("Rs 1939", 1939.0),
        ("56,02 €", 56.02),
        ("1.234,56", 1234.56),
        ("12,500", 12500.0),
        (319, 319.0),
        ("no amount", None),
        (True, None),
    ],
)
def test_amounts_are_read_with_either_decimal_mark(text, number):
    assert parse_number(text) == number


@pytest.mark.parametrize(
    ("text", "day"),
    [
        ("2014-08-03", date(2014, 8, 3)),
        ("August 3 , 2014", date(2014, 8, 3)),
        ("Jan 1, 2022", date(2022, 1, 1)),
        ("28/11/2022", date(2022, 11, 28)),
        ("7. Mai 2014", date(2014, 5, 7)),
        ("02 Juillet 2015", date(2015, 7, 2)),
        ("Released 2026-11-09", date(2026, 11, 9)),
        ("31/02/2020", None),  # no such day
        ("soon", None),
    ],
)
def test_dates_are_read_as_calendar_days(text, day):
    assert parse_date(text) == day


def test_each_kind_folds_what_a_careful_reader_would():
    assert normalised("text", "The MIT License (MIT)") == normalised("text", "mit license mit")
    assert normalised("text", "Kim  Davies and\ncontributors.") == "kim davies and contributors"
    assert normalised("identifier", "# BLR_WFLD2015") == normalised("identifier", "#BLR_WFLD2015") == "blr_wfld2015"
    assert normalised("identifier", "No. 42183017") == "42183017"
    assert normalised("currency", "$") == normalised("currency", "US Dollars") == "USD"
    assert normalised("currency", "29.99 €") == "EUR" and normalised("currency", "Rs") == "INR"
    assert normalised("number", "$127.50") == normalised("number", "127.5") == 127.5


SPEC = FieldSpec("total_amount", "number", "the total")


def test_a_field_is_right_exactly_or_normalised_and_wrong_otherwise():
    exact = score_field("d", SPEC, "4.11", "4.11")
    assert (exact.outcome, exact.exact) == (RIGHT, True)
    folded = score_field("d", SPEC, "4.11", "$4.11")
    assert (folded.outcome, folded.exact) == (RIGHT, False)
    wrong = score_field("d", SPEC, "4.11", "4.12")
    assert (wrong.outcome, wrong.exact) == (WRONG, False)
    unreadable = score_field("d", SPEC, "4.11", "a lot")
    assert unreadable.outcome == WRONG


def test_an_accepted_spelling_counts_and_an_empty_answer_is_missed():
    name = FieldSpec("licence_name", "text", "the name")
    accepted = score_field("d", name, "The MIT License (MIT)", "MIT", accept=["MIT License", "MIT"])
    assert (accepted.outcome, accepted.exact) == (RIGHT, True)
    assert score_field("d", name, "The MIT License (MIT)", "BSD").outcome == WRONG
    missed = score_field("d", name, "MIT License", None, dropped_for="quote not found in chunk 3")
    assert (missed.outcome, missed.dropped_for) == (MISSED, "quote not found in chunk 3")
    assert score_field("d", name, "MIT License", "  ").outcome == MISSED


def test_a_field_the_document_does_not_state_is_right_only_when_left_out():
    name = FieldSpec("copyright_holder", "text", "who")
    absent = score_field("d", name, None, None)
    assert (absent.outcome, absent.exact) == (ABSENT, True)
    invented = score_field("d", name, None, "Apache Software Foundation")
    assert (invented.outcome, invented.exact) == (SPURIOUS, False)


def test_the_summary_counts_outcomes_beside_the_leave_everything_out_baseline():
    name = FieldSpec("f", "text", "f")
    scores = [
        score_field("a", name, "x", "x"),  # right, exact
        score_field("b", name, "x", "X."),  # right, normalised
        score_field("c", name, "x", "y"),  # wrong
        score_field("d", name, "x", None, dropped_for="quote not found in chunk 1"),  # missed
        score_field("e", name, None, None),  # absent
    ]
    summary = field_summary(scores)
    assert summary["outcomes"] == {RIGHT: 2, WRONG: 1, MISSED: 1, ABSENT: 1, SPURIOUS: 0}
    assert summary["accuracy"] == pytest.approx(3 / 5) and summary["exact_accuracy"] == pytest.approx(2 / 5)
    assert summary["accuracy_on_stated"] == pytest.approx(2 / 4)
    assert summary["empty_baseline_accuracy"] == pytest.approx(1 / 5)
    assert summary["ratio_to_empty_baseline"] == pytest.approx(3.0)
    assert summary["missed_dropped_quote_not_found"] == 1
    assert field_summary([])["ratio_to_empty_baseline"] is None


def test_the_majority_baseline_and_accuracy():
    assert majority_baseline(["invoice", "paper", "invoice", "licence"]) == ("invoice", 0.5)
    assert majority_baseline(["b", "a"]) == ("a", 0.5)  # a tie goes to the first name
    assert majority_baseline([]) == ("", 0.0)
    assert accuracy([("a", "a"), ("a", "b")]) == 0.5 and accuracy([]) == 0.0


def test_a_kept_value_whose_quote_does_not_say_it_is_told_apart():
    assert quote_states("42183017", "Invoice Number: 42183017")
    assert not quote_states("42183017", "Greetings from Amazon Web Services")


def test_the_committed_manifest_is_scorable(tmp_path):
    manifest = Manifest.load(MANIFEST)
    assert len(manifest.documents) >= 20 and len({d.type_name for d in manifest.documents}) >= 3
    assert len({d.doc_id for d in manifest.documents}) == len(manifest.documents)
    assert all(len(d.sha256) == 64 for d in manifest.documents)
    assert all("AGPL" not in s["licence"] for s in manifest.sources.values())
    for kind in manifest.types:
        schema = kind.json_schema()
        assert set(schema["properties"]) == {f.name for f in kind.fields}
        assert all(p["description"] for p in schema["properties"].values())
    broken = json.loads(MANIFEST.read_text(encoding="utf-8"))
    broken["documents"][0]["fields"] = {}
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(broken))
    with pytest.raises(ManifestError, match="fields"):
        Manifest.load(path)
