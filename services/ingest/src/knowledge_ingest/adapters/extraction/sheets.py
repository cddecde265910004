"""Workbooks: each sheet one ``[Sheet: name]`` block holding a markdown table (its first
non-empty row as the header). XLSX/XLSM through openpyxl read-only with cached values, not
formulas; XLS through xlrd; XLSB through pyxlsb. Empty rows, trailing empty cells and empty
leading columns are dropped."""

from __future__ import annotations

import zipfile
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, BinaryIO
from xml.etree.ElementTree import ParseError

from knowledge_ingest.adapters.extraction.markdown import LimitReached, TextSink, trim_rows
from knowledge_ingest.domain.extraction import ExtractionFailed

_TIME_CHECK_ROWS = 1000


def extract_xlsx(stream: BinaryIO, sink: TextSink) -> None:
    import openpyxl
    from openpyxl.utils.exceptions import InvalidFileException

    try:
        workbook = openpyxl.load_workbook(stream, read_only=True, data_only=True)
    except (InvalidFileException, zipfile.BadZipFile, KeyError, ValueError, TypeError, ParseError, OSError):
        raise _corrupt("xlsx") from None
    try:
        for sheet in workbook.worksheets:
            sheet.reset_dimensions()  # a wrong stored dimension must not hide rows
            _write_sheet(sink, sheet.title, sheet.iter_rows(values_only=True), "xlsx")
    finally:
        workbook.close()


def extract_xls(stream: BinaryIO, sink: TextSink) -> None:
    import xlrd

    try:
        book = xlrd.open_workbook(file_contents=stream.read(), on_demand=True)
    except xlrd.XLRDError as error:
        if "encrypt" in str(error).lower():
            raise ExtractionFailed(
                "the workbook is password-protected; remove the password and upload it again",
                reason=ExtractionFailed.FILE_ENCRYPTED, file_format="xls",
            ) from None
        raise _corrupt("xls") from None
    except (ValueError, KeyError, IndexError, AssertionError, OSError):
        raise _corrupt("xls") from None
    try:
        for index in range(book.nsheets):
            sheet = book.get_sheet(index)
            rows = ([_xls_value(book, cell) for cell in sheet.row(r)] for r in range(sheet.nrows))
            _write_sheet(sink, sheet.name, rows, "xls")
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
                    _write_sheet(sink, name, rows, "xlsb")
            except (KeyError, ValueError, IndexError, TypeError):
                sink.warnings.append("a sheet could not be read")
    finally:
        workbook.close()


def _write_sheet(sink: TextSink, name: str, rows: Iterable[Sequence[object]], file_format: str) -> None:
    collected: list[Sequence[object]] = []
    stopped: LimitReached | None = None
    try:
        for row in _bounded(rows, sink):
            collected.append(row)
    except LimitReached as stop:  # the rows read so far are still written
        stopped = stop
    except (KeyError, ValueError, IndexError, TypeError, ParseError, zipfile.BadZipFile):
        raise _corrupt(file_format) from None
    kept = trim_rows(collected)
    if kept:  # an empty sheet adds nothing, not even its marker
        sink.sheet(name)
        sink.table(kept)
    if stopped is not None:
        raise stopped


def _bounded(rows: Iterable[Sequence[object]], sink: TextSink) -> Iterator[Sequence[object]]:
    """Rows until the row limit or the remaining character budget; time checked as it goes."""
    budget = sink.remaining()
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
