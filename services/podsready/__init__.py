"""All-or-nothing: the waitForPodsReady timer service (PodsReady timeouts, requeue backoff, deactivation)."""
