"""Shared test support (importable as `support.*`: tests/ is on sys.path via tests/conftest.py)."""
