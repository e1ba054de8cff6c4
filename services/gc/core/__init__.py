"""gc's pure core: which remote objects are orphans, which manager Workloads retention removes."""
