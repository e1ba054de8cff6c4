"""The MultiKueue dispatcher's pure core: no I/O, no clock, no logging."""
