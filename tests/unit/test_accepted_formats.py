"""One list of accepted formats (knowledge_ingest.domain.formats), and everyone who names them
follows it: extraction's claims, the ingest README's format table, the upload's OpenAPI
description and `knowledge upload --help`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from knowledge_ingest.domain.formats import ACCEPTED, accepted_extensions
from knowledge_ingest.extraction.detect import claimed_format

ROOT = Path(__file__).resolve().parents[2]


def test_every_accepted_name_and_type_claims_its_format():
    for fmt in ACCEPTED:
        for claim in fmt.extensions:
            assert claimed_format(f"file{claim}", "") == (None if fmt.key == "text" else fmt.key), claim
        for media_type in fmt.media_types:
            assert claimed_format("file", media_type) == (None if fmt.key == "text" else fmt.key), media_type


def test_the_readme_format_table_names_every_format_and_its_licence():
    readme = (ROOT / "services/ingest/README.md").read_text()
    table = readme[readme.index("| format | reader (licence) | structure kept |") :].split("\n\n", 1)[0]
    rows = table.splitlines()[2:]
    for extension in accepted_extensions():
        if extension in (".jpeg", ".tiff", ".markdown", ".json"):  # spelled .jpg, .tif, … in the table
            continue
        assert any(f"`{extension}" in row.split("|")[1] or f" {extension}" in row.split("|")[1] for row in rows), (
            extension
        )
    assert all("(" in row.split("|")[2] or row.split("|")[2].strip() == "—" for row in rows)  # a licence each


def test_the_openapi_description_and_the_cli_list_them():
    spec = json.loads((ROOT / "gateway/src/knowledge_gateway/openapi.json").read_text())
    upload = next(
        operation
        for path in spec["paths"].values()
        for operation in path.values()
        if isinstance(operation, dict) and operation.get("operationId") == "UploadDocument"
    )
    description = upload["requestBody"]["description"]
    from knowledge_cli import rest

    parser = argparse.ArgumentParser()
    rest.add_parsers(parser.add_subparsers())
    help_text = parser._subparsers._group_actions[0].choices["upload"].format_help()
    for extension in accepted_extensions():
        assert extension in description, extension
        assert extension in " ".join(help_text.split()), extension
