"""Reversible anonymisation of a question before it reaches a language model.

E-mail addresses, phone numbers, IBANs (mod-97 checked), card numbers (Luhn checked) and
names from a configured list become placeholders such as ``<EMAIL_1>``; the same value
always gets the same placeholder, so the model can still refer to it, and the answer is
de-anonymised by putting the values back. Nothing here is logged.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b")
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
_PHONE = re.compile(r"(?<![\w+])(?:\+|00)?\d[\d ().\-/]{5,}\d(?!\w)")
_PLACEHOLDER = re.compile(r"<(EMAIL|PHONE|IBAN|CARD|NAME)_(\d+)>")


def _iban_valid(value: str) -> bool:
    compact = value.replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    rearranged = compact[4:] + compact[:4]
    digits = "".join(str(int(ch, 36)) for ch in rearranged)
    return int(digits) % 97 == 1


def _luhn_valid(value: str) -> bool:
    digits = [int(ch) for ch in value if ch.isdigit()]
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for index, digit in enumerate(reversed(digits)):
        if index % 2 == 1:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return total % 10 == 0


def _phone_like(value: str) -> bool:
    digits = sum(ch.isdigit() for ch in value)
    # A bare number (an amount, a year, an id) is not a phone number: it needs a prefix or separators.
    return 7 <= digits <= 15 and (value.startswith(("+", "00", "0")) or any(ch in value for ch in " ()-./"))


@dataclass
class Anonymised:
    """The anonymised text and the mapping that reverses it."""

    text: str
    values: dict[str, str] = field(default_factory=dict)  # placeholder -> original

    def restore(self, text: str) -> str:
        return _PLACEHOLDER.sub(lambda m: self.values.get(m.group(0), m.group(0)), text)

    def mask(self, text: str) -> str:
        """The same placeholders in another text (e.g. the context), longest values first."""
        for placeholder, original in sorted(self.values.items(), key=lambda item: -len(item[1])):
            text = text.replace(original, placeholder)
        return text


class Anonymiser:
    def __init__(self, names: Iterable[str] = ()) -> None:
        cleaned = sorted({n.strip() for n in names if n.strip()}, key=len, reverse=True)
        self._names = (
            re.compile(r"\b(?:" + "|".join(re.escape(n) for n in cleaned) + r")\b", re.IGNORECASE) if cleaned else None
        )

    def anonymise(self, text: str) -> Anonymised:
        result = Anonymised(text=text)
        by_value: dict[tuple[str, str], str] = {}

        def placeholder(kind: str, original: str) -> str:
            key = (kind, original)
            if key not in by_value:
                count = sum(1 for k in by_value if k[0] == kind) + 1
                by_value[key] = f"<{kind}_{count}>"
                result.values[by_value[key]] = original
            return by_value[key]

        def replace(pattern: re.Pattern[str], kind: str, valid: Callable[[str], bool] | None = None) -> None:
            def substitute(match: re.Match[str]) -> str:
                value: str = match.group(0)
                if valid is not None and not valid(value):
                    return value
                return placeholder(kind, value)

            result.text = pattern.sub(substitute, result.text)

        replace(_EMAIL, "EMAIL")
        replace(_IBAN, "IBAN", _iban_valid)
        replace(_CARD, "CARD", _luhn_valid)
        replace(_PHONE, "PHONE", _phone_like)
        if self._names is not None:
            replace(self._names, "NAME")
        return result
