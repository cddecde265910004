"""Document AI's pure rules: the taxonomy's validation, calibrated classification, schemaless
tables measured from real extractor output, and the evidence rule (no value without a quote
found in the chunk it cites)."""

from __future__ import annotations

import io
import json

import openpyxl
import pytest
from knowledge_documents_ai.domain.classification import Calibration, calibrate, classify, llm_choice
from knowledge_documents_ai.domain.errors import TaxonomyInvalid
from knowledge_documents_ai.domain.evidence import SourceChunk, checked
from knowledge_documents_ai.domain.extraction import MAX_ATTEMPTS, extraction_messages, interpret
from knowledge_documents_ai.domain.tables import column_type, extract_tables
from knowledge_documents_ai.domain.taxonomy import (
    UNCLASSIFIED,
    anchor_text,
    document_type,
    extraction_schema,
)
from knowledge_ingest.extraction import DocumentExtractor
from knowledge_runtime.chunking import split_structural

INVOICE_SCHEMA = {
    "type": "object",
    "properties": {
        "invoice_number": {"type": "string", "description": "the invoice's number as printed"},
        "total": {"type": "number", "description": "the amount due, in the invoice's currency"},
    },
    "required": ["invoice_number"],
}


# --- taxonomy ----------------------------------------------------------------------------------


def test_a_type_is_validated_and_its_anchor_text_carries_name_description_and_examples():
    kind = document_type(" invoice ", "A bill for goods or services.", ["Invoice no. 7 ...", "  "], added_by="u1")
    assert (kind.name, kind.examples, kind.added_by) == ("invoice", ("Invoice no. 7 ...",), "u1")
    assert anchor_text(kind) == "invoice\nA bill for goods or services.\nInvoice no. 7 ..."
    assert anchor_text(document_type("purchase_order", "An order.")).startswith("purchase order\n")


@pytest.mark.parametrize(
    ("name", "description", "field"),
    [
        ("Invoice", "x", "name"),
        ("1invoice", "x", "name"),
        ("in voice", "x", "name"),
        ("a" * 65, "x", "name"),
        (UNCLASSIFIED, "x", "name"),
        ("invoice", "   ", "description"),
    ],
)
def test_a_bad_type_names_its_field(name, description, field):
    with pytest.raises(TaxonomyInvalid) as caught:
        document_type(name, description)
    assert caught.value.field == field and caught.value.code == "INVALID_ARGUMENT"


def test_a_schema_needs_an_object_of_described_properties():
    schema = extraction_schema("invoice", 1, INVOICE_SCHEMA)
    assert [(f.name, f.json_type, f.required) for f in schema.fields] == [
        ("invoice_number", "string", True),
        ("total", "number", False),
    ]
    for bad in (
        {"type": "array"},
        {"type": "object", "properties": {}},
        {"type": "object", "properties": {"total": {"type": "number"}}},  # no description
        {"type": "object", "properties": {"total": {"type": "nonsense", "description": "x"}}},  # invalid JSON Schema
    ):
        with pytest.raises(TaxonomyInvalid) as caught:
            extraction_schema("invoice", 1, bad)
        assert caught.value.field == "json_schema"


# --- classification ----------------------------------------------------------------------------


def test_a_clear_fit_is_confident_and_lists_the_alternatives_most_likely_first():
    result = classify({"invoice": 0.62, "contract": 0.31, "policy": 0.28})
    assert result.type_name == "invoice" and result.confidence > 0.9 and result.similarity == 0.62
    assert [c.type_name for c in result.alternatives] == ["contract", "policy", UNCLASSIFIED]
    assert sum(c.probability for c in calibrate({"invoice": 0.62, "contract": 0.31})) == pytest.approx(1.0)


def test_a_document_that_fits_no_type_is_unclassified_not_forced_into_the_nearest():
    result = classify({"invoice": 0.12, "contract": 0.09})
    assert result.type_name == UNCLASSIFIED and not result.classified
    assert result.alternatives[0].type_name == "invoice"


def test_two_close_types_share_the_confidence():
    result = classify({"invoice": 0.50, "receipt": 0.49})
    assert result.type_name == "invoice" and 0.4 < result.confidence < 0.6


def test_a_lower_temperature_sharpens_and_the_floor_moves_the_none_candidate():
    similarities = {"invoice": 0.40, "receipt": 0.35}
    sharp = classify(similarities, calibration=Calibration(temperature=0.01)).confidence
    soft = classify(similarities, calibration=Calibration(temperature=0.2)).confidence
    assert sharp > soft
    assert classify(similarities, calibration=Calibration(floor=0.5)).type_name == UNCLASSIFIED


def test_evidence_is_the_chunks_most_like_the_chosen_type():
    chunks = {"invoice": [(11, 0.2), (12, 0.7), (13, 0.5), (14, 0.1)], "contract": [(11, 0.9)]}
    result = classify({"invoice": 0.6, "contract": 0.3}, chunks)
    assert [e.chunk_id for e in result.evidence] == [12, 13, 11]


def test_the_llm_may_only_choose_among_the_candidates():
    chunks = {"invoice": [(1, 0.9)], "receipt": [(2, 0.8)]}
    embedding = classify({"invoice": 0.50, "receipt": 0.49}, chunks)
    chosen = llm_choice(embedding, " Receipt.\n", chunks)
    assert chosen is not None and (chosen.type_name, chosen.decided_by) == ("receipt", "llm")
    assert [e.chunk_id for e in chosen.evidence] == [2]
    assert chosen.confidence == pytest.approx(
        next(c.probability for c in embedding.alternatives if c.type_name == "receipt")
    )
    assert llm_choice(embedding, "a spaceship manual") is None


# --- schemaless tables, from the real extractor and chunker --------------------------------------


def workbook() -> bytes:
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Orders"
    sheet.append(["Item", "Quantity", "Price", "Shipped", "Paid"])
    for i in range(1, 41):
        sheet.append(
            [f"part-{i:03d}", i * 3, round(i * 1.25, 2), f"2026-03-{(i % 28) + 1:02d}", "yes" if i % 2 else "no"]
        )
    sheet.append(["Total", "=SUM(B2:B41)", None, None, None])  # a formula without a cached value
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()


def test_a_real_sheet_s_table_comes_back_whole_with_measured_types():
    extracted = DocumentExtractor(use_unstructured=False).extract(
        workbook(), "orders.xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
    )
    chunks = split_structural(extracted.text, max_chars=800)  # small chunks: the table spans several
    assert len(chunks) > 2
    tables = extract_tables((chunk.content, chunk.chunk_index) for chunk in chunks)
    assert len(tables) == 1
    table = tables[0]
    assert table.title == "Sheet: Orders"
    assert [(c.name, c.type) for c in table.columns] == [
        ("Item", "text"),
        ("Quantity", "integer"),
        ("Price", "number"),
        ("Shipped", "date"),
        ("Paid", "boolean"),
    ]
    assert table.row_count == 41  # 40 parts and the total, each once although chunks overlap
    assert table.rows[0] == ("part-001", 3, 1.25, "2026-03-02", True)
    assert table.rows[-1][:2] == ("Total", 2460)  # the formula, evaluated by ingest
    assert table.schema()["columns"][2] == {"name": "Price", "type": "number", "filled": 40, "empty": 1}
    assert list(table.sources) == [chunk.chunk_index for chunk in chunks if "|" in chunk.content]


def test_rows_two_texts_share_at_their_seam_count_once():
    header = "| a | b |\n| --- | --- |\n"
    first, second = header + "| 1 | x |\n| 2 | y |\n", header + "| 2 | y |\n| 3 | z |\n"  # an overlap of one row
    (table,) = extract_tables([(first, "c1"), (second, "c2")])
    assert table.rows == ((1, "x"), (2, "y"), (3, "z")) and table.sources == ("c1", "c2")


def test_two_tables_with_text_between_stay_two():
    text = "| a | b |\n| --- | --- |\n| 1 | 2 |\n\nSome prose.\n\n| a | b |\n| --- | --- |\n| 3 | 4 |\n"
    tables = extract_tables([(text, "c1")])
    assert [t.rows for t in tables] == [((1, 2),), ((3, 4),)]


@pytest.mark.parametrize(
    ("cells", "kind"),
    [
        (["1", "2,500", "-3"], "integer"),
        (["1.5", "2", "12%"], "number"),
        (["2026-01-31", ""], "date"),
        (["2026-02-30"], "text"),  # not a date
        (["yes", "No", "TRUE"], "boolean"),
        (["", " "], "empty"),
        (["1", "n/a"], "text"),
    ],
)
def test_a_column_s_type_is_the_narrowest_that_fits_every_cell(cells, kind):
    assert column_type(cells) == kind


# --- extraction: schema validation and evidence ------------------------------------------------


CHUNKS = [
    SourceChunk(7, "INVOICE No. INV-2041\nDate: 2026-11-02", page=1, section="Header"),
    SourceChunk(8, "Amount due:   1,250.00 EUR", page=2, section="Totals"),
]


def test_a_valid_answer_is_accepted_and_each_value_keeps_its_evidence():
    answer = json.dumps(
        {
            "values": [
                {"field": "invoice_number", "value": "INV-2041", "chunk_id": 7, "quote": "invoice no. INV-2041"},
                {"field": "total", "value": 1250.0, "chunk_id": 8, "quote": "Amount due: 1,250.00 EUR"},
            ]
        }
    )
    interpretation = interpret(f"```json\n{answer}\n```", extraction_schema("invoice", 1, INVOICE_SCHEMA))
    assert interpretation.acceptable
    result = checked(interpretation.claims, CHUNKS)
    assert result.dropped == ()
    assert [(v.field, v.value, v.evidence.chunk_id, v.evidence.page, v.evidence.section) for v in result.values] == [
        ("invoice_number", "INV-2041", 7, 1, "Header"),
        ("total", 1250.0, 8, 2, "Totals"),
    ]


def test_no_value_survives_without_a_quote_found_in_the_chunk_it_cites():
    claims = [
        {"field": "invoice_number", "value": "INV-2041", "chunk_id": 8, "quote": "INV-2041"},  # wrong chunk
        {"field": "total", "value": 99.0, "chunk_id": 8, "quote": "Amount due: 99.00"},  # invented
        {"field": "total", "value": 1250.0, "chunk_id": 8},  # no quote
        {"field": "total", "value": 1250.0, "chunk_id": 99, "quote": "1,250.00"},  # a chunk it was not given
        {"field": "total", "value": 1250.0, "chunk_id": True, "quote": "1,250.00"},  # not an id
    ]
    result = checked(claims, CHUNKS)
    assert result.values == ()
    assert [d.why for d in result.dropped] == [
        "quote not found in chunk 8",
        "quote not found in chunk 8",
        "no quote",
        "cites no chunk the model was given",
        "cites no chunk the model was given",
    ]


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ("not json", "not JSON"),
        ('{"fields": []}', '{"values": [...]}'),
        ('{"values": [{"field": "colour", "value": "red"}]}', "fields not in the schema: colour"),
        ('{"values": [{"field": "total", "value": "a lot"}]}', "total: 'a lot' is not of type 'number'"),
        ('{"values": [{"field": "total", "value": 3}]}', "'invoice_number' is a required property"),
    ],
)
def test_an_invalid_answer_says_what_was_wrong_for_the_retry(answer, problem):
    interpretation = interpret(answer, extraction_schema("invoice", 1, INVOICE_SCHEMA))
    assert not interpretation.acceptable and problem in interpretation.problem
    retry = extraction_messages(extraction_schema("invoice", 1, INVOICE_SCHEMA), CHUNKS, interpretation.problem)
    assert interpretation.problem in retry[-1]["content"] and "[chunk_id=7]" in retry[-1]["content"]
    assert MAX_ATTEMPTS >= 2
