"""The RL frameworks' own functions executed beside ours on the same float64 tensors (make frameworks-test).

This package runs only in the frameworks' environment (frameworks/, built by `make frameworks-env`), never in the
reader's: verl, TRL, OpenRLHF and ms-swift are imported from there, agentrl from this checkout.

- cases.py: the edge tensors every check runs on (ragged rows, a row with no policy tokens, a single token, a long
  sequence, log-ratios beyond the frameworks' clamps).
- compare.py: a Check (their function and ours, as two callables of one case) and how a pair is judged: value and
  gradient, to a tolerance fixed here.
- verl.py, trl.py, openrlhf.py, swift.py: the checks of each framework, naming the options of data/frameworks/*.toml
  each one executes.
- run.py: every check on every case for one framework set, written to results/frameworks/<set>.json.
"""
