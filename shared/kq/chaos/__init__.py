"""kq chaos: a run under injected faults, and the checker of what kq promises."""
