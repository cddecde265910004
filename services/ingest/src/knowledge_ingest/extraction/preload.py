"""Imported once by the extraction fork server (``isolated.py``), never by a child: what each
child would otherwise load again for every file is loaded here and shared by fork.

That is the optional unstructured path: loading unstructured, spaCy and its English model in
each child cost far more than reading the file. Without the extra installed this is one failed
import.
"""

from knowledge_ingest.extraction import unstructured_path

unstructured_path.partitioners()
