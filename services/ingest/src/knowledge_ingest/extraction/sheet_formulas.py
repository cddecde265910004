"""Formula cells a program wrote without a cached value (openpyxl, pandas, most report
generators), evaluated with the ``formulas`` library (EUPL-1.1) from the values of the workbook
(its other sheets too). What cannot be evaluated (another workbook, a function it lacks, a
cycle, a range too large, past the budget) keeps its formula text, so a cell is never silently
empty."""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Callable
from typing import Any

from openpyxl.utils.cell import column_index_from_string, range_boundaries

MAX_FORMULAS_PER_SHEET = 20_000
MAX_RANGE_CELLS = 100_000
_MAX_DEPTH = 200
_WHOLE_COLUMNS = re.compile(r"^\$?([A-Z]{1,3}):\$?([A-Z]{1,3})$")
_WHOLE_ROWS = re.compile(r"^\$?(\d+):\$?(\d+)$")


class _Unevaluable(Exception):
    pass


class Formula:
    """A formula cell that still needs a value: its text, and whether it shows a date."""

    __slots__ = ("is_date", "text")

    def __init__(self, text: str, is_date: bool) -> None:
        self.text = text
        self.is_date = is_date

    def __str__(self) -> str:  # what a cell shows when it cannot be evaluated
        return self.text


Grid = list[list[object]]  # a sheet's rows of values, row 1 column A at [0][0]
Cell = tuple[str, int, int]  # (sheet name in upper case, 0-based row, 0-based column)


def evaluate_workbook(sheets: dict[str, Grid], check_time: Callable[[], None]) -> dict[str, int]:
    """Replace every ``Formula`` in the sheets (by name) with its value where it can be
    computed, references to other sheets of the workbook included; the rest stay ``Formula``
    (shown as their text). Returns, per sheet, how many were left as text."""
    book = {name.upper(): grid for name, grid in sheets.items()}
    pending = [
        (name.upper(), r, c)
        for name, grid in sheets.items()
        for r, row in enumerate(grid)
        for c, v in enumerate(row)
        if isinstance(v, Formula)
    ]
    if not pending:
        return {}
    logging.getLogger("schedula").setLevel(logging.CRITICAL)  # it logs every failed formula
    evaluator = _Evaluator(book, check_time)
    for cell in pending[: MAX_FORMULAS_PER_SHEET * max(len(book), 1)]:
        try:
            evaluator.value(cell, 0)
        except _Unevaluable:
            evaluator.failed.add(cell)
    left: dict[str, int] = {}
    for name in sheets:
        grid = book[name.upper()]
        count = sum(1 for row in grid for v in row if isinstance(v, Formula))
        if count:
            left[name] = count
    return left


class _Evaluator:
    def __init__(self, book: dict[str, Grid], check_time: Callable[[], None]) -> None:
        self._book = book
        self._check_time = check_time
        self._compiled: dict[str, Any] = {}
        self._active: set[Cell] = set()
        self.failed: set[Cell] = set()
        self._evaluated = 0
        self._budget = MAX_FORMULAS_PER_SHEET * max(len(book), 1)

    def value(self, at: Cell, depth: int) -> object:
        value = self._cell(at)
        if not isinstance(value, Formula):
            return value
        if at in self.failed or at in self._active or depth > _MAX_DEPTH:
            raise _Unevaluable
        self._evaluated += 1
        if self._evaluated > self._budget:
            raise _Unevaluable
        if self._evaluated % 500 == 0:
            self._check_time()
        self._active.add(at)
        try:
            result = self._compute(at[0], value, depth)
        except _Unevaluable:
            self.failed.add(at)
            raise
        finally:
            self._active.discard(at)
        self._book[at[0]][at[1]][at[2]] = result
        return result

    def _cell(self, at: Cell) -> object:
        grid = self._book.get(at[0])
        if grid is not None and at[1] < len(grid) and at[2] < len(grid[at[1]]):
            return grid[at[1]][at[2]]
        return None

    def _compute(self, sheet: str, cell: Formula, depth: int) -> object:
        import formulas
        import numpy as np
        import schedula

        function = self._compiled.get(cell.text)
        if function is None:
            try:
                function = formulas.Parser().ast(cell.text)[1].compile()
            except Exception:  # noqa: BLE001 - the library raises many kinds for a formula it cannot parse
                raise _Unevaluable from None
            self._compiled[cell.text] = function
        arguments = []
        for reference in function.inputs:
            name, (top, left, bottom, right) = self._bounds(sheet, reference)
            block = np.empty((bottom - top + 1, right - left + 1), dtype=object)
            for r in range(top, bottom + 1):
                for c in range(left, right + 1):
                    value = self.value((name, r, c), depth + 1)
                    block[r - top, c - left] = schedula.EMPTY if value is None else _excel_value(value)
            arguments.append(block)
        try:
            result = function(*arguments)
        except Exception:  # noqa: BLE001 - a function the library lacks, a type it refuses
            raise _Unevaluable from None
        value = np.asarray(result, dtype=object)
        if value.size != 1:  # an array formula's spill: not one cell's value
            raise _Unevaluable
        value = value.ravel()[0]
        if value is schedula.EMPTY:
            return 0
        if isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, formulas.tokens.operand.XlError):
            return str(value)  # what Excel shows: #DIV/0!, #N/A
        if cell.is_date and isinstance(value, (int, float)) and not isinstance(value, bool):
            from openpyxl.utils.datetime import from_excel

            try:
                return from_excel(value)
            except (ValueError, OverflowError):
                return value
        return value

    def _bounds(self, sheet: str, reference: str) -> tuple[str, tuple[int, int, int, int]]:
        """The sheet a reference is on and its 0-based (top, left, bottom, right)."""
        if "!" in reference:  # 'SHEET NAME'!A1:B2, as the library spells it (upper case)
            sheet, reference = reference.rsplit("!", 1)
            if sheet.startswith("'") and sheet.endswith("'"):
                sheet = sheet[1:-1].replace("''", "'")
            if sheet.startswith("[") or sheet not in self._book:  # another workbook, or no such sheet
                raise _Unevaluable
        grid = self._book[sheet]
        height = len(grid)
        width = max((len(row) for row in grid), default=0)
        whole_columns, whole_rows = _WHOLE_COLUMNS.match(reference), _WHOLE_ROWS.match(reference)
        try:
            if whole_columns:
                left = column_index_from_string(whole_columns.group(1))
                right = min(column_index_from_string(whole_columns.group(2)), max(width, left))
                top, bottom = 1, max(height, 1)
            elif whole_rows:
                top, bottom = int(whole_rows.group(1)), min(int(whole_rows.group(2)), max(height, 1))
                left, right = 1, max(width, 1)
            else:
                bounds = range_boundaries(reference)
                if None in bounds:
                    raise _Unevaluable
                left, top, right, bottom = (int(b) for b in bounds)  # type: ignore[arg-type]
        except (ValueError, TypeError):
            raise _Unevaluable from None
        if (bottom - top + 1) * (right - left + 1) > MAX_RANGE_CELLS:
            raise _Unevaluable
        return sheet, (top - 1, left - 1, bottom - 1, right - 1)


def _excel_value(value: object) -> object:
    """Dates as Excel's serial numbers, as a formula sees them."""
    if isinstance(value, (dt.datetime, dt.date)):
        from openpyxl.utils.datetime import to_excel

        return to_excel(value)
    return value
