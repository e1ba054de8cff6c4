"""The kwok-like cluster part: controllers acting on one cluster's store in-process."""
