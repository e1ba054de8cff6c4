"""One module per job framework, each an Adapter (core/adapter.py)."""
