"""The entropy-law report words the judgement it is given, on points built here."""
import math

from agentrl.ch10 import entropy_law, entropy_law_report


def _points(a, b, noise):
    entropies = [0.6 - 0.03 * i for i in range(16)]
    return [(h, -a * math.exp(h) + b + noise * (-1) ** i) for i, h in enumerate(entropies)]


def test_the_report_carries_the_judgement_and_says_it():
    points = {0: _points(0.5, 1.5, 0.0), 1: _points(0.6, 1.6, 0.01), 2: _points(0.4, 1.4, 0.02)}
    steps = list(range(0, 80, 5))
    law = entropy_law_report.report(points, steps, 160, 0)
    judged = [entropy_law.judge(points[s]) for s in points]
    assert law['verdict'] == entropy_law.verdict(judged)
    assert law['printed'][-1] == f'verdict by the rule fixed in advance: {law["verdict"]}'
    assert law['judgement']['seeds'] == [0, 1, 2] and law['fit']['seed'] == 0
    worded = {entropy_law.SUPPORTED: 'supported', entropy_law.MIXED: 'only partly supported (mixed)',
              entropy_law.NOT_SUPPORTED: 'not supported'}[law['verdict']]
    assert law['text'].startswith(f'**By the rule fixed in advance, the law is {worded} on TinyAgent.**')
