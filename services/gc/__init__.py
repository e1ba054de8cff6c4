"""Garbage collection of remote orphans and finished objects (arrives with the MultiKueue issue)."""
