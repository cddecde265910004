"""Scoring of documents-ai against a labelled set (``bench/docai.py``; the rules unit-tested).

The set is a manifest (``bench/data/docai_labels.json``): the taxonomy to create (each type's
description, examples and the fields of its schema, each field with the *kind* it is scored as)
and the documents, each with where it comes from, its SHA-256, its true type and, for a type
with fields, the true value of every field (``null``: the document does not state it, so the
right answer is to leave it out). ``accept`` lists other spellings of a true value that a
careful reader would also accept (``"MIT License"`` for ``"The MIT License (MIT)"``).

A field is *exactly* right when the returned value, as text and stripped, is the true value
or one accepted; *normalised* right when both normalise to the same thing for the field's
kind (text: case, accents of width, punctuation and spacing folded; identifier: also ``#``,
``No.`` and spaces gone; number: the amount parsed, ``1.234,56`` and ``1,234.56`` alike;
date: the calendar day, from ISO, day-first numeric, or a day and month name in English,
French or German; currency: ISO code, from a symbol or a name).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

KINDS = ("text", "identifier", "number", "date", "currency")

# outcomes of one (document, field) pair
RIGHT = "right"  # a true value, returned and matching (normalised)
WRONG = "wrong"  # a true value, returned and not matching
MISSED = "missed"  # a true value, not returned (left out, dropped for its quote, or refused)
ABSENT = "absent"  # no true value, and none returned: right
SPURIOUS = "spurious"  # no true value, and one returned: wrong


class ManifestError(ValueError):
    """The manifest is not what the bench can score; the message says where."""


@dataclass(frozen=True)
class FieldSpec:
    name: str
    kind: str
    description: str


@dataclass(frozen=True)
class TypeSpec:
    name: str
    description: str
    examples: tuple[str, ...]
    fields: tuple[FieldSpec, ...]

    def json_schema(self) -> dict[str, Any]:
        """The extraction schema the bench stores for this type (every value a string: the
        scoring, not the schema, knows a field's kind)."""
        return {
            "type": "object",
            "properties": {f.name: {"type": "string", "description": f.description} for f in self.fields},
        }


@dataclass(frozen=True)
class LabelledDocument:
    doc_id: str
    source: str  # "package==version" (an sdist) or a dataset under shared/datasets
    path: str  # inside the sdist (below its top folder), or "corpus.jsonl#ID"
    sha256: str
    type_name: str
    fields: Mapping[str, Any] = field(default_factory=dict)  # name -> true value or None
    accept: Mapping[str, Sequence[str]] = field(default_factory=dict)

    @property
    def filename(self) -> str:
        return self.path.rsplit("/", 1)[-1].replace("corpus.jsonl#", "scifact-") + (
            ".md" if self.path.startswith("corpus.jsonl#") else ""
        )


@dataclass(frozen=True)
class Manifest:
    types: tuple[TypeSpec, ...]
    documents: tuple[LabelledDocument, ...]
    sources: Mapping[str, Mapping[str, str]]

    def type_named(self, name: str) -> TypeSpec:
        return next(t for t in self.types if t.name == name)

    @classmethod
    def load(cls, path: Path) -> Manifest:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            types = tuple(
                TypeSpec(
                    t["name"],
                    t["description"],
                    tuple(t.get("examples", ())),
                    tuple(FieldSpec(f["name"], f["kind"], f["description"]) for f in t.get("fields", ())),
                )
                for t in data["types"]
            )
            documents = tuple(
                LabelledDocument(
                    d["id"],
                    d["source"],
                    d["path"],
                    d["sha256"],
                    d["type"],
                    dict(d.get("fields", {})),
                    {k: tuple(v) for k, v in d.get("accept", {}).items()},
                )
                for d in data["documents"]
            )
            sources = dict(data["sources"])
        except (OSError, KeyError, TypeError, ValueError) as error:
            raise ManifestError(f"{path}: {error!r}") from None
        manifest = cls(types, documents, sources)
        manifest.check()
        return manifest

    def check(self) -> None:
        names = {t.name for t in self.types}
        for kind in self.types:
            for spec in kind.fields:
                if spec.kind not in KINDS:
                    raise ManifestError(f"{kind.name}.{spec.name}: kind {spec.kind!r} is not one of {KINDS}")
        for doc in self.documents:
            if doc.type_name not in names:
                raise ManifestError(f"{doc.doc_id}: type {doc.type_name!r} is not in the taxonomy")
            if doc.source not in self.sources:
                raise ManifestError(f"{doc.doc_id}: source {doc.source!r} is not listed under sources")
            expected = {f.name for f in self.type_named(doc.type_name).fields}
            if set(doc.fields) != expected:
                raise ManifestError(f"{doc.doc_id}: fields {sorted(doc.fields)} are not {sorted(expected)}")


# ---- normalisation ----

_PUNCT = re.compile(r"[^\w]+", re.UNICODE)
_NUMBER = re.compile(r"[-+]?\d[\d.,\s']*")
# Month names as the labelled documents write them (folded: no accents), January first.
_MONTH_NAMES = {
    "en": "january february march april may june july august september october november december",
    "fr": "janvier fevrier mars avril mai juin juillet aout septembre octobre novembre decembre",
    "de": "januar februar marz april mai juni juli august september oktober november dezember",
}
MONTHS = {
    **{name[:3]: number for number, name in enumerate(_MONTH_NAMES["en"].split(), 1)},  # "Jan 1, 2022"
    **{name: number for names in _MONTH_NAMES.values() for number, name in enumerate(names.split(), 1)},
}
CURRENCIES = {
    "$": "USD",
    "us$": "USD",
    "usd": "USD",
    "dollar": "USD",
    "dollars": "USD",
    "us dollars": "USD",
    "€": "EUR",
    "eur": "EUR",
    "euro": "EUR",
    "euros": "EUR",
    "₹": "INR",
    "rs": "INR",
    "rs.": "INR",
    "inr": "INR",
    "rupees": "INR",
    "zł": "PLN",
    "zl": "PLN",
    "pln": "PLN",
    "£": "GBP",
    "gbp": "GBP",
}


def _folded(text: str) -> str:
    """NFKD without combining marks, casefolded: "Février" and "fevrier" alike."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def normal_text(value: Any) -> str:
    words = _PUNCT.sub(" ", _folded(str(value))).split()
    if words and words[0] == "the":
        words = words[1:]
    return " ".join(words)


def normal_identifier(value: Any) -> str:
    text = _folded(str(value)).strip()
    text = re.sub(r"^(?:no\b|nr\b|n°|number\b|#)\s*[.:]?\s*", "", text)
    return re.sub(r"[\s#]+", "", text)


def parse_number(value: Any) -> float | None:
    """The amount in a value: ``"$4.11"`` 4.11, ``"1,939.00"`` 1939.0, ``"56,02 €"`` 56.02."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    found = _NUMBER.search(str(value))
    if found is None:
        return None
    digits = re.sub(r"[\s']", "", found.group()).rstrip(".,")
    last_dot, last_comma = digits.rfind("."), digits.rfind(",")
    if last_dot >= 0 and last_comma >= 0:  # the later one is the decimal mark
        decimal = "." if last_dot > last_comma else ","
        thousands = "," if decimal == "." else "."
        digits = digits.replace(thousands, "").replace(decimal, ".")
    elif last_comma >= 0:  # a comma alone: decimal when 1-2 digits follow it, else thousands
        tail = digits[last_comma + 1 :]
        digits = digits.replace(",", ".") if len(tail) in (1, 2) and digits.count(",") == 1 else digits.replace(",", "")
    try:
        return float(digits)
    except ValueError:
        return None


def parse_date(value: Any) -> date | None:
    """The calendar day: ``2014-08-03``, ``03/08/2014`` (day first), ``August 3 , 2014``,
    ``7. Mai 2014``, ``02 Juillet 2015``, ``Jan 1, 2022``."""
    text = _folded(str(value)).strip()
    try:
        if m := re.search(r"(\d{4})-(\d{1,2})-(\d{1,2})", text):
            return date(int(m[1]), int(m[2]), int(m[3]))
        if m := re.search(r"(\d{1,2})[./-](\d{1,2})[./-](\d{4})", text):
            return date(int(m[3]), int(m[2]), int(m[1]))
        if m := re.search(r"(\d{1,2})\.?\s+([a-z]+)\.?\s+(\d{4})", text):
            if m[2] in MONTHS:
                return date(int(m[3]), MONTHS[m[2]], int(m[1]))
        if m := re.search(r"([a-z]+)\.?\s+(\d{1,2})\s*,?\s*(\d{4})", text):
            if m[1] in MONTHS:
                return date(int(m[3]), MONTHS[m[1]], int(m[2]))
    except ValueError:  # a day or month out of range
        return None
    return None


def normal_currency(value: Any) -> str:
    text = _folded(str(value)).strip()
    if text in CURRENCIES:
        return CURRENCIES[text]
    for token, code in sorted(CURRENCIES.items(), key=lambda item: -len(item[0])):
        if not any(c.isalpha() for c in token) and token in text:  # a symbol anywhere: "$4.11"
            return code
    words = set(re.findall(r"[a-z]+", text))
    codes = {code for token, code in CURRENCIES.items() if token in words}
    return codes.pop() if len(codes) == 1 else text.upper()


def normalised(kind: str, value: Any) -> Any:
    """``value`` as the field's kind compares it; None when it cannot be read as that kind."""
    if kind == "number":
        number = parse_number(value)
        return None if number is None else round(number, 2)
    if kind == "date":
        return parse_date(value)
    if kind == "currency":
        return normal_currency(value) or None
    if kind == "identifier":
        return normal_identifier(value) or None
    return normal_text(value) or None


def quote_states(value: Any, quote: str) -> bool:
    """Whether a kept value's quote contains the value (text-normalised): the service keeps a
    value whose quote is in the cited chunk, whether or not the quote says the value."""
    return normal_text(value) in normal_text(quote)


def empty(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


@dataclass(frozen=True)
class FieldScore:
    doc_id: str
    field: str
    outcome: str
    exact: bool  # the returned value is the true one (or an accepted one) as written
    expected: Any
    returned: Any
    dropped_for: str = ""  # why the service dropped the value it was given, if it did


def score_field(
    doc_id: str,
    spec: FieldSpec,
    expected: Any,
    returned: Any,
    accept: Sequence[str] = (),
    dropped_for: str = "",
) -> FieldScore:
    truths = [] if empty(expected) else [expected, *accept]
    if not truths:
        outcome = ABSENT if empty(returned) else SPURIOUS
        return FieldScore(doc_id, spec.name, outcome, outcome == ABSENT, expected, returned, dropped_for)
    if empty(returned):
        return FieldScore(doc_id, spec.name, MISSED, False, expected, returned, dropped_for)
    exact = any(str(returned).strip() == str(t).strip() for t in truths)
    mine = normalised(spec.kind, returned)
    right = exact or (mine is not None and any(mine == normalised(spec.kind, t) for t in truths))
    return FieldScore(doc_id, spec.name, RIGHT if right else WRONG, exact, expected, returned, dropped_for)


# ---- the figures ----


def majority_baseline(true_types: Sequence[str]) -> tuple[str, float]:
    """The most frequent true type (ties by name) and the accuracy of always answering it."""
    if not true_types:
        return "", 0.0
    counts = Counter(true_types)
    name = min(counts, key=lambda n: (-counts[n], n))
    return name, counts[name] / len(true_types)


def accuracy(pairs: Iterable[tuple[str, str]]) -> float:
    """The share of (true, predicted) pairs that agree; 0 for none."""
    listed = list(pairs)
    return sum(t == p for t, p in listed) / len(listed) if listed else 0.0


def ratio(value: float, baseline: float) -> float | None:
    return value / baseline if baseline > 0 else None


def field_summary(scores: Sequence[FieldScore]) -> dict[str, Any]:
    """Field accuracy (normalised and exact) over every labelled field and over those with a
    true value, the outcome counts, and the "leave every field out" baseline beside it."""
    outcomes = Counter(s.outcome for s in scores)
    total = len(scores)
    present = [s for s in scores if s.outcome in (RIGHT, WRONG, MISSED)]
    right = outcomes[RIGHT] + outcomes[ABSENT]
    empty_baseline = (outcomes[ABSENT] + outcomes[SPURIOUS]) / total if total else 0.0
    normalised_accuracy = right / total if total else 0.0
    return {
        "fields": total,
        "with_true_value": len(present),
        "accuracy": normalised_accuracy,
        "exact_accuracy": sum(s.exact for s in scores) / total if total else 0.0,
        "accuracy_on_stated": outcomes[RIGHT] / len(present) if present else 0.0,
        "exact_on_stated": sum(s.exact for s in present) / len(present) if present else 0.0,
        "outcomes": {name: outcomes[name] for name in (RIGHT, WRONG, MISSED, ABSENT, SPURIOUS)},
        "empty_baseline_accuracy": empty_baseline,
        "ratio_to_empty_baseline": ratio(normalised_accuracy, empty_baseline),
        "missed_dropped_quote_not_found": sum(
            s.outcome == MISSED and s.dropped_for.startswith("quote not found") for s in scores
        ),
    }


def by_field(scores: Sequence[FieldScore]) -> dict[str, dict[str, Any]]:
    names = sorted({s.field for s in scores})
    return {name: field_summary([s for s in scores if s.field == name]) for name in names}
