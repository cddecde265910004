"""Word 97-2003 (.doc) and PowerPoint 97-2003 (.ppt) through LibreOffice (MPL-2.0; Debian's
``libreoffice-writer-nogui`` and ``libreoffice-impress-nogui``), which converts them headless to
.docx and .pptx; the same readers as for those (``word``, ``slides``) then read the result, so a
.doc has a .docx's headings, lists and tables and a .ppt a .pptx's pages, titles and notes.
No licence-compatible Python library reads these formats with their structure (antiword and
catdoc are GPL, and give text only).

LibreOffice runs inside the extraction child, so within its address-space limit (a conversion
peaks near 220 MB) and its time limit (``CONVERT_SECONDS`` at most, killed with its process
group past it), with a profile of its own in a temporary directory that is removed after: no two
conversions share state, and nothing a document does persists. That profile turns macros off and
points every internet protocol at a proxy on a closed local port, and the conversion runs with
an environment of its own: a document's links to the network or to local files are not followed
(the tests hold it to that). The cost, measured in bench/RESULTS.md: 1.2-2.3 s per document."""

from __future__ import annotations

import functools
import io
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import BinaryIO

from knowledge_ingest.domain.extraction import ExtractionFailed
from knowledge_ingest.extraction import slides, word
from knowledge_ingest.extraction.markdown import TextSink

CONVERT_SECONDS = 120.0  # one conversion at most; less when the file's time limit leaves less
_NAMES = {"doc": "Word 97-2003", "ppt": "PowerPoint 97-2003"}
_TARGETS = {"doc": "docx", "ppt": "pptx"}
# The profile's settings: macros never run, remote content is never fetched (every protocol goes
# through a proxy on the discard port, where nothing listens), links are not updated.
_PROFILE = """<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema"
 xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<item oor:path="/org.openoffice.Office.Common/Security/Scripting"><prop oor:name="MacroSecurityLevel" oor:op="fuse"><value>3</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Security/Scripting"><prop oor:name="DisableMacrosExecution" oor:op="fuse"><value>true</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Security/Scripting"><prop oor:name="BlockUntrustedRefererLinks" oor:op="fuse"><value>true</value></prop></item>
<item oor:path="/org.openoffice.Inet/Settings"><prop oor:name="ooInetProxyType" oor:op="fuse"><value>1</value></prop></item>
<item oor:path="/org.openoffice.Inet/Settings"><prop oor:name="ooInetNoProxy" oor:op="fuse"><value></value></prop></item>
<item oor:path="/org.openoffice.Inet/Settings"><prop oor:name="ooInetHTTPProxyName" oor:op="fuse"><value>127.0.0.1</value></prop></item>
<item oor:path="/org.openoffice.Inet/Settings"><prop oor:name="ooInetHTTPProxyPort" oor:op="fuse"><value>9</value></prop></item>
<item oor:path="/org.openoffice.Inet/Settings"><prop oor:name="ooInetHTTPSProxyName" oor:op="fuse"><value>127.0.0.1</value></prop></item>
<item oor:path="/org.openoffice.Inet/Settings"><prop oor:name="ooInetHTTPSProxyPort" oor:op="fuse"><value>9</value></prop></item>
<item oor:path="/org.openoffice.Inet/Settings"><prop oor:name="ooInetFTPProxyName" oor:op="fuse"><value>127.0.0.1</value></prop></item>
<item oor:path="/org.openoffice.Inet/Settings"><prop oor:name="ooInetFTPProxyPort" oor:op="fuse"><value>9</value></prop></item>
<item oor:path="/org.openoffice.Office.Writer/Content/Update"><prop oor:name="Link" oor:op="fuse"><value>2</value></prop></item>
<item oor:path="/org.openoffice.Office.Impress/Content/Update"><prop oor:name="Link" oor:op="fuse"><value>2</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="UseOpenCL" oor:op="fuse"><value>false</value></prop></item>
</oor:items>
"""


@functools.cache
def soffice() -> str | None:
    """LibreOffice's launcher, or None where it is not installed."""
    return shutil.which("soffice") or shutil.which("libreoffice")


def extract_doc(stream: BinaryIO, sink: TextSink) -> None:
    word.extract_docx(_converted(stream, sink, "doc"), sink)


def extract_ppt(stream: BinaryIO, sink: TextSink) -> int:
    return slides.extract_pptx(_converted(stream, sink, "ppt"), sink)


def _converted(stream: BinaryIO, sink: TextSink, file_format: str) -> BinaryIO:
    """The file converted to its OOXML cousin by LibreOffice, in memory."""
    binary = soffice()
    if binary is None:
        raise ExtractionFailed(
            f"{_NAMES[file_format]} files need LibreOffice, which is not installed here; save the file as "
            f".{_TARGETS[file_format]} and upload it again",
            reason=ExtractionFailed.UNSUPPORTED_FORMAT,
            file_format=file_format,
        )
    seconds = min(CONVERT_SECONDS, max(sink.seconds_left(), 1.0))
    with tempfile.TemporaryDirectory(prefix="knowledge-soffice-") as work:
        root = Path(work)
        (root / "profile" / "user").mkdir(parents=True)
        (root / "profile" / "user" / "registrymodifications.xcu").write_text(_PROFILE)
        source = root / f"input.{file_format}"
        with open(source, "wb") as target:
            shutil.copyfileobj(stream, target)
        _run(binary, root, source, _TARGETS[file_format], seconds, file_format)
        converted = root / "out" / f"input.{_TARGETS[file_format]}"
        if not converted.is_file() or converted.stat().st_size == 0:
            raise ExtractionFailed(
                f"the {_NAMES[file_format]} file could not be read (damaged, or protected by a password)",
                reason=ExtractionFailed.FILE_CORRUPT,
                file_format=file_format,
            )
        return io.BytesIO(converted.read_bytes())


def _run(binary: str, root: Path, source: Path, target: str, seconds: float, file_format: str) -> None:
    environment = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(root),
        "TMPDIR": str(root),
        "LANG": "C.UTF-8",
        "SAL_USE_VCLPLUGIN": "svp",  # no display
    }
    command = [
        binary,
        "--headless",
        "--invisible",
        "--norestore",
        "--nologo",
        "--nodefault",
        "--nolockcheck",
        "--nofirststartwizard",
        f"-env:UserInstallation={(root / 'profile').as_uri()}",
        "--convert-to",
        target,
        "--outdir",
        str(root / "out"),
        str(source),
    ]
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=environment,
        cwd=root,
        start_new_session=True,  # its own process group: soffice starts soffice.bin, killed together
    )
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        raise ExtractionFailed(
            f"converting the {_NAMES[file_format]} file took longer than {seconds:g} seconds; save it as "
            f".{_TARGETS[file_format]} and upload it again",
            reason=ExtractionFailed.EXTRACTION_TIMEOUT,
            file_format=file_format,
        ) from None
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)  # anything it left behind
        except ProcessLookupError:
            pass
