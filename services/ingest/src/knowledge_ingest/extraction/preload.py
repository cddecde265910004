"""Imported once by the extraction fork server (``isolated.py``), never by a child: what each
child would otherwise load again for every file is loaded here and shared by fork.

That is the optional unstructured path: unstructured, spaCy and its English model took about 11 s
per file in the child when each child loaded them (0.2 s for the same DOCX natively). Without
the extra installed this is one failed import.
"""

from knowledge_ingest.extraction import unstructured_path

unstructured_path.partitioners()
