"""pass@k: the unbiased estimate of solving a task at least once in k tries, from n tries with c successes."""
import math


def pass_at_k(n, c, k):
    """P(at least one of k tries drawn without replacement from n, c of them correct, is correct)."""
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f'pass_at_k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}')
    if n - c < k:  # every draw of k must include a success
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)
