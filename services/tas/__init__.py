"""Topology-aware scheduling: the placement solver and the ungater (arrives with the TAS issue)."""
