"""The entropy-performance law R = -a exp(H) + b (Cui et al., 2025, https://arxiv.org/abs/2505.22617), fitted on
the first half of a run's (entropy, performance) points and judged on the second half against two simple baselines.

Everything here is plain Python floats summed left to right: the same points give the same digits on every machine
(a LAPACK least-squares call does not promise that). Points are (H, R) pairs in step order.

The judgement (fixed after seed 0's probed run had been seen and before seeds 1 and 2 were trained; notebook 09
says so):

- predictors of the held-back points, each built from the first half only: the law fitted by least squares; the
  last first-half value carried forward; a straight line in H fitted by least squares;
- two windows: the whole second half, and its late part (the last quarter of the points, where the entropy has
  been low longest and a law of entropy should matter most);
- on one run the law *beats the baselines* in a window if its RMSE there is below both baselines' RMSE;
- across runs the law is *supported* if it beats the baselines in both windows on a majority of the runs, *mixed*
  if it does so in one window only, and *not supported* otherwise.
"""
import math

PREDICTORS = ('law', 'last value', 'line in H')
WINDOWS = ('second half', 'late')
SUPPORTED, MIXED, NOT_SUPPORTED = 'supported', 'mixed', 'not supported'


def _least_squares(xs, ys):
    """(slope, intercept) of the ordinary least-squares line y = slope * x + intercept, in closed form."""
    if len(xs) != len(ys) or len(xs) < 2:
        raise ValueError(f'a least-squares line needs at least two (x, y) pairs, got {len(xs)} x and {len(ys)} y')
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    if spread == 0:
        raise ValueError('a least-squares line needs at least two different x values')
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / spread
    return slope, mean_y - slope * mean_x


def fit_law(points):
    """(a, b) of R = -a exp(H) + b fitted by least squares to (H, R) points (linear in a, b given exp(H))."""
    slope, intercept = _least_squares([math.exp(h) for h, _ in points], [r for _, r in points])
    return -slope, intercept


def law(a, b, h):
    """The law's R at entropy h."""
    return -a * math.exp(h) + b


def fit_line(points):
    """(slope, intercept) of the straight line R = slope * H + intercept fitted by least squares to (H, R) points."""
    return _least_squares([h for h, _ in points], [r for _, r in points])


def rmse(points, predict):
    """Root-mean-square error of predict(H) against R over (H, R) points."""
    if not points:
        raise ValueError('the RMSE of no points is undefined')
    return math.sqrt(sum((r - predict(h)) ** 2 for h, r in points) / len(points))


def r_squared(points, predict):
    """1 - residual variance / variance of R over the points."""
    mean_r = sum(r for _, r in points) / len(points)
    total = sum((r - mean_r) ** 2 for _, r in points) / len(points)
    return 1 - rmse(points, predict) ** 2 / total


def predictors(first):
    """{name: function H -> predicted R} of the law and the two baselines, each built from the points `first`."""
    return _predictors(fit_law(first), fit_line(first), first[-1][1])


def _predictors(law_fit, line_fit, last):
    (a, b), (slope, intercept) = law_fit, line_fit
    return {'law': lambda h: law(a, b, h), 'last value': lambda h: last, 'line in H': lambda h: slope * h + intercept}


def split(points):
    """(first half, second half, late part): late is the last quarter of the points (at least one)."""
    if len(points) < 4:
        raise ValueError(f'judging the law needs at least 4 points (2 to fit, 2 to predict), got {len(points)}')
    half = len(points) // 2
    return points[:half], points[half:], points[len(points) - max(1, len(points) // 4):]


def judge(points):
    """The law and the baselines fitted on the first half of points, scored on the second half and its late part.

    -> dict: first_half, late (point counts), law (a, b of the first-half fit), line (slope, intercept),
    last_value, rmse {window: {predictor: RMSE}}, law_beats_baselines {window: bool}.
    """
    first, second, late = split(points)
    (a, b), (slope, intercept) = fit_law(first), fit_line(first)
    predict = _predictors((a, b), (slope, intercept), first[-1][1])
    scores = {window: {name: rmse(held, predict[name]) for name in PREDICTORS}
              for window, held in zip(WINDOWS, (second, late))}
    beats = {window: scores[window]['law'] < min(scores[window][name] for name in PREDICTORS[1:])
             for window in WINDOWS}
    return dict(first_half=len(first), late=len(late), law=dict(a=a, b=b), line=dict(slope=slope, intercept=intercept),
                last_value=first[-1][1], rmse=scores, law_beats_baselines=beats)


def verdict(judgements):
    """SUPPORTED, MIXED or NOT_SUPPORTED over the judge() dicts of several runs (the rule in the module docstring)."""
    if not judgements:
        raise ValueError('a verdict needs at least one judged run')
    needed = len(judgements) // 2 + 1  # a strict majority
    won = [window for window in WINDOWS if sum(j['law_beats_baselines'][window] for j in judgements) >= needed]
    return SUPPORTED if len(won) == len(WINDOWS) else (MIXED if won else NOT_SUPPORTED)


def probe_noise(values, attempts):
    """An upper bound on the standard deviation of a pass@1 estimate from `attempts` attempts in all, averaged over
    the pass@1 values (mean p(1-p)/attempts, square-rooted): how well any predictor can hope to do."""
    return math.sqrt(sum(r * (1 - r) for r in values) / len(values) / attempts)
