"""What builds, checks and measures the companion, beside the agentrl package it runs: the notebook runner, the report,
the site, the calibration search and table, the substrate sweep, the benchmark, the profile and the mutation run.

Nothing in agentrl imports from here; a notebook imports agentrl only.
"""
