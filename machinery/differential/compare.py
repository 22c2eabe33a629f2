"""One check: a framework's function and ours, called on the same case, compared in value and gradient.

A check's two callables take a case (cases.make) and return a tensor: the framework's through its own code, ours
through agentrl. Neither may do the other's arithmetic. Where the framework's function is a method, the check builds
a stand-in object that carries only configuration or a distributed helper, and says so in `stand_in`.

The gradient compared is that of sum(w * output) for fixed random weights w of the output's shape, with respect to
every case leaf the check names: a whole Jacobian-vector product, so that a wrong weight on a single token shows.
"""
from dataclasses import dataclass, field
from typing import Callable

import torch

from machinery.differential import cases as case_module

RTOL = 1e-6  # relative: well above float64's rounding, well below any modelling difference (ms-swift's std
ATOL = 1e-12  # epsilon 1e-4 against our 1e-6 moves an advantage by 3e-4); verl's 1e-8 beside a token count is inside
# A function that casts its inputs to float32 by design (OpenRLHF's compute_approx_kl) carries about 1e-7 of each
# log-probability's size in every result, so near zero no relative tolerance fits it. Such a check is judged at
# float32's scale instead: log-probabilities here are at most about 40 in size, so 1e-5 absolute is some 30 float32
# steps of them, and still a hundred times below the smallest modelling difference these checks declare.
TOLERANCES = {'float64': (RTOL, ATOL), 'float32': (1e-4, 1e-5)}


@dataclass(frozen=True)
class Differs:
    """Where a check is expected to differ, and why: in these sets (reference, latest, ...) on these cases, and,
    when `when` is given, only on a case whose tensors meet the condition the why names (when(case) -> bool: a
    clamp's bound passed by some policy token, say), so that the declaration holds on tensors of any seed."""
    why: str
    cases: tuple = case_module.CASES
    sets: tuple = ('reference', 'latest', 'swift')
    when: Callable = None


@dataclass(frozen=True)
class Check:
    framework: str  # as data/frameworks/*.toml's [framework] name spells it
    options: tuple  # the map options whose computation this check executes
    function: str  # the framework's function, as its source names it
    ours: str  # the function of ours it is held against
    setting: str  # the arguments that make this check one of several on the same function
    theirs: Callable  # case -> tensor, through the framework's code
    mine: Callable  # case -> tensor, through agentrl
    wrt: tuple = ('logp',)  # the case leaves differentiated
    differs: tuple = ()  # Differs entries: the expected differences
    stand_in: str = ''  # what a stand-in object supplies, when the function is a method
    cases: tuple = case_module.CASES  # the cases it runs on
    value_only: bool = False  # an output without a gradient (a controller's coefficient, a mask)
    precision: str = 'float64'  # 'float32' where the framework's function casts to float32 by design (TOLERANCES)

    def __post_init__(self):
        if self.precision not in TOLERANCES:
            raise ValueError(f'unknown precision {self.precision!r}; allowed: {", ".join(map(repr, TOLERANCES))}')

    @property
    def name(self):
        return f'{self.framework}: {self.function} ({self.setting})' if self.setting else \
            f'{self.framework}: {self.function}'

    def expected_difference(self, set_name, case, tensors=None):
        """The reason this check should differ on the case named `case` in `set_name`, or '' when it should agree;
        tensors: that case's tensors, which a declaration with a condition reads (without them it is assumed met)."""
        for entry in self.differs:
            if set_name in entry.sets and case in entry.cases and (
                    entry.when is None or tensors is None or bool(entry.when(tensors))):
                return entry.why
        return ''


def _weights(shape, seed=7):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _value_and_grads(fn, case, wrt, value_only):
    out = fn(case)
    if not torch.is_tensor(out):
        out = torch.as_tensor(out, dtype=torch.float64)
    out = out.to(torch.float64)
    if value_only or not out.requires_grad:
        return out.detach(), {name: torch.zeros_like(case[name]) for name in wrt}, out.requires_grad
    grads = torch.autograd.grad((out * _weights(out.shape)).sum(), [case[name] for name in wrt], allow_unused=True)
    return out.detach(), {name: (torch.zeros_like(case[name]) if g is None else g.detach())
                          for name, g in zip(wrt, grads)}, True


def gap(a, b, rtol=RTOL, atol=ATOL):
    """The largest |a - b| over atol + rtol |b|, element by element (<= 1: they agree); nan and inf must match."""
    if a.shape != b.shape:
        return float('inf')
    same_special = (torch.isnan(a) & torch.isnan(b)) | (torch.isinf(a) & (a == b))
    if (torch.isnan(a) | torch.isnan(b) | torch.isinf(a) | torch.isinf(b))[~same_special].any():
        return float('inf')
    ok = ~same_special
    if not ok.any():
        return 0.0
    return float(((a[ok] - b[ok]).abs() / (atol + rtol * b[ok].abs())).max())


def summary(t):
    """One number that stands for an output in a table: itself if scalar, else the sum of its finite entries."""
    return float(t) if t.numel() == 1 else float(t[torch.isfinite(t)].sum())


def run_check(check, case_name, set_name, seed=0):
    """Both sides on one case -> a dict: the gaps, whether they agree, and whether that was expected."""
    expected = check.expected_difference(set_name, case_name, case_module.make(case_name, seed))
    try:
        theirs, their_grads, their_differentiable = _value_and_grads(
            check.theirs, case_module.make(case_name, seed), check.wrt, check.value_only)
    except Exception as error:  # the framework's code raised on this case: recorded, and never an agreement
        return dict(case=case_name, outcome='raised', error=f'{type(error).__name__}: {error}'[:300],
                    expected=expected)
    ours, our_grads, _ = _value_and_grads(check.mine, case_module.make(case_name, seed), check.wrt, check.value_only)
    rtol, atol = TOLERANCES[check.precision]
    value_gap = gap(theirs, ours, rtol, atol)
    grad_gap = max((gap(their_grads[n], our_grads[n], rtol, atol) for n in check.wrt), default=0.0)
    agrees = value_gap <= 1 and grad_gap <= 1
    return dict(case=case_name, outcome='agrees' if agrees else 'differs', value_gap=value_gap, grad_gap=grad_gap,
                theirs=summary(theirs), ours=summary(ours), differentiable=their_differentiable, expected=expected)


def as_expected(result):
    """True when a case's outcome is the declared one: agreement where none is declared, a difference where one is."""
    return (result['outcome'] == 'agrees') == (not result['expected'])


@dataclass
class Registry:
    """The checks of one framework module, in the order they were declared."""
    checks: list = field(default_factory=list)

    def add(self, *args, **kwargs):
        self.checks.append(Check(*args, **kwargs))
