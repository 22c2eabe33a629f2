"""Layer 1, the math core: per-token log-probabilities, KL estimators, exact enumerations, pass@k.

Nothing here knows about agents, tasks or training; every function works on plain tensors.
"""
