"""MultiKueue: dispatch workloads to worker clusters (arrives with the MultiKueue issue)."""
