"""The `kq` command line: the local stack, objects in and out, workload history."""
