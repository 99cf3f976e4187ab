"""Start-up workload: a script that does nothing.

Only what a tool costs to start and to finish (imports, setting up, writing an
empty profile) shows here; every other workload's added time includes it.
"""
