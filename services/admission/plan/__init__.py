"""The admission shell's pure half: what to decide and publish, with no I/O, no clock, no async.

inputs.py turns mirror records into core events, partition.py holds one cluster's core and
what the shell tracks around it (commands in flight, echo gates), outputs.py turns a cycle's
result into bus commands and decision events, pending_pacer.py paces pending-condition writes.
The async shell (handlers.py, leader.py, service.py) only feeds these and publishes.
"""
