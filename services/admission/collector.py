"""The garbage collector's thresholds for the scheduler's process (and its virtual-time bench).

The scheduler holds every pending workload (50,000 in large-scale) and allocates steadily as
records come in: with Python's default thresholds (700, 10, 10) the collector took 23 % of the
core's CPU in `kq bench ../shared/bench/large-scale.yaml --virtual-time`, 4 % with these (-19 %
CPU in all). Memory: at most this many young objects wait for a collection.
"""

GC_THRESHOLDS = (50_000, 20, 100)
