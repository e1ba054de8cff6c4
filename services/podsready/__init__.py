"""All-or-nothing: PodsReady timeouts, requeue backoff, deactivation (arrives with the waitForPodsReady issue)."""
