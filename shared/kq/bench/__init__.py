"""`kq bench`: Kueue's scheduler performance test for kq, live (the whole stack) or on a virtual clock.

    config.py    the generator schema, strict          generate.py  objects and the creation schedule
    live.py      the stack, driven through the API      runner.py    watch, record, mimic execution
    metrics.py   recorded events -> figures (pure)      report.py    human output and the summary YAML
    cli.py       the `kq bench` command

The admission core alone on a virtual clock is services/admission/bench_virtual.py, beside the
core it drives (kq never imports `services`; cli.py finds it by name).
"""
