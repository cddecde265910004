"""Workbooks: each sheet a ``[Sheet: name]`` marker, a ``## Sheet: name`` heading (so the
document text and the chunk it starts name the sheet) and a markdown table, its first non-empty
row as the header. XLSX/XLSM through openpyxl read-only: cached values where the file has them,
else the formula evaluated (``sheet_formulas``), else its text; merged ranges repeat their value
in every cell. XLS through xlrd; XLSB through pyxlsb. Empty rows, trailing empty cells and empty
leading columns are dropped; a sheet wider than ``MAX_TABLE_COLUMNS`` is written as column groups
that each repeat the key (first) column."""

from __future__ import annotations

import zipfile
from collections.abc import Iterable, Iterator, Sequence
from itertools import zip_longest
from typing import Any, BinaryIO, cast
from xml.etree.ElementTree import ParseError

from knowledge_ingest.domain.extraction import ExtractionFailed
from knowledge_ingest.extraction.markdown import LimitReached, TextSink, trim_rows
from knowledge_ingest.extraction.sheet_formulas import Formula, evaluate_workbook

_TIME_CHECK_ROWS = 1000
MAX_TABLE_COLUMNS = 12  # wider tables are split into groups of the key column and 11 more
_MERGE_CELL = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}mergeCell"


def extract_xlsx(stream: BinaryIO, sink: TextSink) -> None:
    import openpyxl
    from openpyxl.utils.exceptions import InvalidFileException

    try:
        workbook = openpyxl.load_workbook(stream, read_only=True, data_only=True)
        formulas = openpyxl.load_workbook(stream, read_only=True, data_only=False)
    except (InvalidFileException, zipfile.BadZipFile, KeyError, ValueError, TypeError, ParseError, OSError):
        raise _corrupt("xlsx") from None
    read: list[tuple[str, list[list[object]], Any]] = []  # every sheet's rows first: formulas reach across
    stopped: LimitReached | None = None
    try:
        budget = sink.remaining()
        for sheet, formula_sheet in zip(workbook.worksheets, formulas.worksheets, strict=True):
            sheet.reset_dimensions()  # a wrong stored dimension must not hide rows
            has_formulas, has_merges = _scan(workbook, sheet)
            rows: Iterable[Sequence[object]] = sheet.iter_rows(values_only=True)
            if has_formulas:  # read in step with the formulas, for those without a cached value
                formula_sheet.reset_dimensions()
                rows = _xlsx_rows(rows, formula_sheet.iter_rows())
            grid, stopped = _collect(sink, rows, "xlsx", budget)
            budget -= sum(len(str(v)) + 3 for row in grid for v in row if v is not None)
            read.append((sheet.title, grid, sheet if has_merges else None))
            if stopped is not None:
                break
        try:
            unevaluated = evaluate_workbook({title: grid for title, grid, _ in read}, sink.check_time)
        except LimitReached as stop:  # out of time: what was computed shows, the rest its text
            stopped, unevaluated = stopped or stop, {}
        if unevaluated:
            sink.warnings.append(f"{sum(unevaluated.values())} formulas could not be evaluated and show their text")
        for title, grid, merged in read:
            if merged is not None:
                _fill_merged(grid, _merged_ranges(workbook, merged))
            _write_table(sink, title, grid)
    finally:
        workbook.close()
        formulas.close()
    if stopped is not None:
        raise stopped


def _scan(workbook: Any, sheet: Any) -> tuple[bool, bool]:
    """Whether the sheet's XML holds formulas and merged ranges: a byte scan, far cheaper than
    parsing it again (done only when it does). Unknown (no path): both, to be safe."""
    path = getattr(sheet, "_worksheet_path", None)
    archive = getattr(workbook, "_archive", None)
    if not path or archive is None:
        return True, True
    formulas = merges = False
    tail = b""
    try:
        with archive.open(path) as source:
            while piece := source.read(1 << 20):
                window = tail + piece
                formulas = formulas or b"<f>" in window or b"<f " in window
                merges = merges or b"<mergeCell " in window
                if formulas and merges:
                    break
                tail = window[-16:]
    except (KeyError, zipfile.BadZipFile, OSError):
        return True, True
    return formulas, merges


def is_date_format(number_format: str) -> bool:
    from openpyxl.styles.numbers import is_date_format as openpyxl_is_date

    return bool(openpyxl_is_date(number_format))


def _xlsx_rows(values: Iterable[Sequence[object]], cells: Iterable[Sequence[Any]]) -> Iterator[list[object]]:
    """Cached values, with a ``Formula`` where a formula cell has none (cells read in step)."""
    for value_row, cell_row in zip_longest(values, cells, fillvalue=()):
        row = list(value_row)
        for index, cell in enumerate(cell_row):
            if index < len(row) and row[index] is not None:
                continue
            text = getattr(cell, "value", None)
            text = getattr(text, "text", text)  # an array formula's text
            if isinstance(text, str) and text.startswith("="):
                row.extend([None] * (index + 1 - len(row)))
                row[index] = Formula(text, is_date_format(getattr(cell, "number_format", None) or "General"))
        yield row


def _merged_ranges(workbook: Any, sheet: Any) -> list[tuple[int, int, int, int]]:
    """The sheet's merged ranges as 1-based (min_col, min_row, max_col, max_row); read-only
    openpyxl does not parse them, so they are read from the sheet's XML."""
    from defusedxml.ElementTree import iterparse
    from openpyxl.utils.cell import range_boundaries

    path = getattr(sheet, "_worksheet_path", None)
    archive = getattr(workbook, "_archive", None)
    if not path or archive is None:
        return []
    ranges = []
    try:
        with archive.open(path) as source:
            for _, element in iterparse(source):
                if element.tag == _MERGE_CELL and element.get("ref"):
                    try:
                        bounds = range_boundaries(element.get("ref"))
                    except (ValueError, TypeError):
                        continue
                    if None not in bounds:
                        ranges.append(cast(tuple[int, int, int, int], bounds))
                element.clear()
    except (KeyError, ParseError, zipfile.BadZipFile, OSError):
        return []
    return ranges


def _fill_merged(grid: list[list[object]], ranges: list[tuple[int, int, int, int]]) -> None:
    """Every cell of a merged range shows its top-left value (as a reader sees it)."""
    for left, top, right, bottom in ranges:
        if top > len(grid) or (right - left + 1) * (bottom - top + 1) > 10_000:
            continue
        first = grid[top - 1]
        value = first[left - 1] if left - 1 < len(first) else None
        if value is None:
            continue
        for r in range(top - 1, min(bottom, len(grid))):
            row = grid[r]
            if len(row) < right:
                row.extend([None] * (right - len(row)))
            for c in range(left - 1, right):
                if row[c] is None:
                    row[c] = value


def extract_xls(stream: BinaryIO, sink: TextSink) -> None:
    import xlrd

    try:
        book = xlrd.open_workbook(file_contents=stream.read(), on_demand=True)
    except xlrd.XLRDError as error:  # type: ignore[attr-defined]  # exported at run time; the stub misses it
        if "encrypt" in str(error).lower():
            raise ExtractionFailed(
                "the workbook is password-protected; remove the password and upload it again",
                reason=ExtractionFailed.FILE_ENCRYPTED,
                file_format="xls",
            ) from None
        raise _corrupt("xls") from None
    except (ValueError, KeyError, IndexError, AssertionError, OSError):
        raise _corrupt("xls") from None
    try:
        for index in range(book.nsheets):
            sheet = book.get_sheet(index)
            rows = ([_xls_value(book, cell) for cell in sheet.row(r)] for r in range(sheet.nrows))
            write_sheet(sink, sheet.name, rows, "xls")
            book.unload_sheet(index)
    finally:
        book.release_resources()


def _xls_value(book: Any, cell: Any) -> object:
    import xlrd

    if cell.ctype == xlrd.XL_CELL_DATE:
        try:
            return xlrd.xldate_as_datetime(cell.value, book.datemode)
        except (ValueError, OverflowError, xlrd.xldate.XLDateError):
            return cell.value
    if cell.ctype == xlrd.XL_CELL_BOOLEAN:
        return bool(cell.value)
    if cell.ctype == xlrd.XL_CELL_ERROR:
        return xlrd.error_text_from_code.get(cell.value, "#ERROR")
    return cell.value


def extract_xlsb(stream: BinaryIO, sink: TextSink) -> None:
    from pyxlsb import Workbook

    try:
        workbook = Workbook(fp=zipfile.ZipFile(stream))
        names = list(workbook.sheets)
    except (zipfile.BadZipFile, KeyError, ValueError, IndexError, TypeError, ParseError, OSError):
        raise _corrupt("xlsb") from None
    try:
        for name in names:
            try:
                with workbook.get_sheet(name) as sheet:
                    rows = ([cell.v for cell in row] for row in sheet.rows())
                    write_sheet(sink, name, rows, "xlsb")
            except (KeyError, ValueError, IndexError, TypeError):
                sink.warnings.append("a sheet could not be read")
    finally:
        workbook.close()


def write_sheet(sink: TextSink, name: str, rows: Iterable[Sequence[object]], file_format: str) -> None:
    grid, stopped = _collect(sink, rows, file_format, sink.remaining())
    _write_table(sink, name, grid)
    if stopped is not None:
        raise stopped


def _collect(
    sink: TextSink, rows: Iterable[Sequence[object]], file_format: str, budget: int
) -> tuple[list[list[object]], LimitReached | None]:
    """The sheet's rows, up to the limits (the limit reached, if one was, besides)."""
    collected: list[list[object]] = []
    try:
        for row in _bounded(rows, sink, budget):
            collected.append(list(row))
    except LimitReached as stop:  # the rows read so far are still written
        return collected, stop
    except (KeyError, ValueError, IndexError, TypeError, ParseError, zipfile.BadZipFile):
        raise _corrupt(file_format) from None
    return collected, None


def _write_table(sink: TextSink, name: str, grid: list[list[object]]) -> None:
    kept = trim_rows(grid)
    if kept:  # an empty sheet adds nothing, not even its marker
        sink.sheet(name)
        sink.heading(2, f"Sheet: {name}")
        for caption, table in column_groups(kept):
            if caption:
                sink.paragraph(caption)
            sink.table(table)


def column_groups(rows: list[list[str]]) -> list[tuple[str, list[list[str]]]]:
    """The table itself, or, wider than ``MAX_TABLE_COLUMNS``, groups of columns that each
    repeat the key (first) column, with a caption saying which columns a group holds."""
    width = max(len(row) for row in rows)
    if width <= MAX_TABLE_COLUMNS:
        return [("", rows)]
    step = MAX_TABLE_COLUMNS - 1
    groups = []
    for start in range(1, width, step):
        end = min(start + step, width)
        table = [[row[0] if row else "", *row[start:end]] for row in rows]
        groups.append((f"Columns {start + 1}–{end} of {width} (with column 1)", table))
    return groups


def _bounded(rows: Iterable[Sequence[object]], sink: TextSink, budget: int) -> Iterator[Sequence[object]]:
    """Rows until the row limit or the character budget; time checked as it goes."""
    for count, row in enumerate(rows, start=1):
        if count > sink.limits.max_rows_per_sheet:
            sink.warnings.append(f"a sheet was cut at {sink.limits.max_rows_per_sheet:,} rows")
            return
        budget -= sum(len(str(v)) + 3 for v in row if v is not None) + 2
        if budget < 0:
            raise LimitReached(f"the text was cut at {sink.limits.max_chars:,} characters")
        if count % _TIME_CHECK_ROWS == 0:
            sink.check_time()
        yield row


def _corrupt(file_format: str) -> ExtractionFailed:
    return ExtractionFailed(
        "the workbook is damaged and cannot be read", reason=ExtractionFailed.FILE_CORRUPT, file_format=file_format
    )
