"""Is the per-turn cost why a claim fails? The same runs on the same substrate with `turn_cost` 0.

Our substrate's GRPO charges an episode for each turn it takes above its group's mean (RLConfig.turn_cost; the
book's GRPO has no such term). That cost was fitted with the rest of the substrate, so it is a candidate cause of
every claim that fails or wobbles on our runs: it pushes the policy towards short episodes, which is also what an
entropy bonus or a KL would have to fight. The ablation trains the settings of those claims again, on the default
substrate with `turn_cost` set to 0 and nothing else changed, on the verdict rule's seeds, and judges each claim by
the same rule (agentrl.ch10.claims.seed_rule).

The rule below was committed before the ablation's runs existed; the notebook prints it before their results.
"""
import dataclasses

from agentrl.ch10 import across, claims, experiments

FIELDS = dict(turn_cost=0.0)  # the one change: no per-turn cost; every other field comes from the default substrate

RULE = (
    'For every claim that does not hold, or whose verdict is fragile, on the default substrate: judge it again by the '
    'same majority rule on the same seeds with turn_cost 0. '
    '(a) It does not hold with the cost and holds without it: the per-turn cost is a candidate cause, and the book\'s '
    'behaviour appears once the cost is gone. '
    '(b) It does not hold either way: the cost is not what separates our runs from the book\'s reading; any reading '
    'must rest on something else. '
    '(c) It holds with the cost and does not hold without it: the cost is what makes it hold here. '
    '(d) It holds either way: the cost does not decide it. '
    'A claim judged seed-dependent without the cost (an exact tie, impossible on an odd number of seeds) is reported '
    'as undecided.'
)

OUTCOMES = {  # (verdict with the cost, verdict without it) -> (letter, what it means)
    (claims.DOES_NOT_HOLD, claims.HOLDS): ('a', 'the per-turn cost is a candidate cause: the book\'s behaviour appears '
                                                'without it'),
    (claims.DOES_NOT_HOLD, claims.DOES_NOT_HOLD): ('b', 'not the per-turn cost: it fails without it too'),
    (claims.HOLDS, claims.DOES_NOT_HOLD): ('c', 'the per-turn cost is what makes it hold here'),
    (claims.HOLDS, claims.HOLDS): ('d', 'the per-turn cost does not decide it: it holds without it too'),
}

SUFFIX = ' | no turn cost'  # appended to each run's name, so that a sweep's record tells the two substrates apart


def _without_cost(spec):
    fields = {**dict(spec.fields), **FIELDS}
    init = None if spec.init is None else _without_cost(spec.init)
    return dataclasses.replace(spec, name=spec.name + SUFFIX, fields=fields, init=init)


def claim_names(claim_keys):
    """The claims named by claim_keys, in the order of claims.CLAIMS -> [Claim]; an unknown key is refused."""
    known = {claim.key: claim for claim in claims.CLAIMS}
    unknown = [key for key in claim_keys if key not in known]
    if unknown:
        raise ValueError(f'not claims: {unknown}; allowed: {list(known)}')
    return [claim for claim in claims.CLAIMS if claim.key in claim_keys]


def ablation_specs(claim_keys, seeds):
    """The runs that judge claim_keys without the per-turn cost, on each seed -> [RunSpec], named
    '<setting> | seed <s> | no turn cost'."""
    settings = sorted({name for claim in claim_names(claim_keys) for name in claim.needs})
    specs = []
    for seed in seeds:
        every = across.claim_specs(seed)
        specs += [_without_cost(dataclasses.replace(every[name], name=f'{name} | seed {seed}')) for name in settings]
    return specs


def runs_by_seed(runs, seeds):
    """{'<setting> | seed <s> | no turn cost': run} -> [the runs of each seed under the names the claims use]."""
    plain = {name[:-len(SUFFIX)]: run for name, run in runs.items() if name.endswith(SUFFIX)}
    return [across.runs_of_seed(plain, seed) for seed in seeds]


def judge(default_verdicts, ablation_runs_by_seed, seeds):
    """Each claim of default_verdicts (seed_verdict dicts on the default substrate) judged again on the ablation's runs
    -> [dict(key, text, kind, with_cost, without_cost, held_on_with, held_on_without, n, outcome, meaning)]."""
    found = []
    for before in default_verdicts:
        claim, = claim_names([before['key']])
        after = claims.seed_verdict(claim, ablation_runs_by_seed, seeds)
        if after is None:
            raise ValueError(f'the ablation has no runs for every setting {before["key"]!r} reads: {claim.needs}')
        letter, meaning = OUTCOMES.get((before['verdict'], after['verdict']), ('?', 'undecided: a tie'))
        found.append(dict(key=claim.key, text=claim.text, kind=claim.kind, with_cost=before['verdict'],
                          without_cost=after['verdict'], held_on_with=before['held_on'],
                          held_on_without=after['held_on'], n=len(seeds), outcome=letter, meaning=meaning))
    return found


def judged_claims(seed_verdicts, fragile_keys=()):
    """The claims the ablation judges: every seed verdict that does not hold, and every fragile one -> [verdicts]."""
    return [v for v in seed_verdicts if v['verdict'] != claims.HOLDS or v['key'] in set(fragile_keys)]


def rule_markdown():
    """The rule as the notebook shows it, before the ablation's results."""
    return f'**The rule, committed before the ablation\'s runs.** {RULE}'


def ablation_table(rows):
    """Markdown: one row per judged claim, with and without the per-turn cost."""
    lines = ['| claim | with the cost | without it | outcome |', '|---|---|---|---|']
    lines += [f'| {row["text"]} | {row["held_on_with"]}/{row["n"]}, {row["with_cost"]} | '
              f'{row["held_on_without"]}/{row["n"]}, {row["without_cost"]} | ({row["outcome"]}) {row["meaning"]} |'
              for row in rows]
    return '\n'.join(lines)
