"""Service tests run against one in-process kubesim cluster, "c1" (tests/support/kubesim_fixtures.py).

A module may set KUBESIM = SimSpec(seed=...) to fix kubesim's generated names and uids for its tests."""
