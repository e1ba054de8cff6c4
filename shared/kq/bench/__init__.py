"""`kq bench`: Kueue's scheduler performance test for kq, live (the whole stack) or on a virtual clock.

    config.py    the generator schema, strict          generate.py  objects and the creation schedule
    live.py      the stack, driven through the API      runner.py    watch, record, mimic execution
    virtual.py   the admission core alone, simulated    metrics.py   recorded events -> figures (pure)
    report.py    human output and the summary YAML      cli.py       the `kq bench` command
"""
