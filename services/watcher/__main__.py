"""python -m services.watcher: the only kq process that talks to Kubernetes."""

from kq.gc_tuning import pause_for_imports, tune_gc_for_caches

if __name__ == "__main__":
    pause_for_imports()  # the collector would walk every object the imports make (kq.gc_tuning)
    from kq.runtime import run_service
    from services.watcher.service import SERVICE, main

    tune_gc_for_caches()  # the object caches made the collector ~17 % of the watcher's CPU
    # Ready only once every kind of every cluster has been listed into the mirror.
    raise SystemExit(run_service(SERVICE, main, ready_when_started=False))
