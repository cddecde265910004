"""Helpers shared by test modules: imported from here, never from another test module.

Fixtures stay in the ``conftest.py`` files; plain functions, classes and constants that more
than one test module uses live in this package, one module per subject.
"""
