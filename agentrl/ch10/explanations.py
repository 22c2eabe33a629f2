"""Why a claim of the chapter fails on our runs: our best explanation, shown only where its premise is measured.

An explanation is written after a look at the runs, so it is a hypothesis, not a finding. Each one names the fact it
rests on (its premise) and a check that measures that fact on one seed's runs. A premise that compares two settings
uses the notebooks' one tie rule (agentrl.ch10.ties), with the tolerance of one draw from the compared settings'
spread over the seeds: a gap below it is no gap, so a tie never counts for the premise. `explain` shows the explanation only
if the premise holds by the claims' seed rule (claims.seed_rule: true on more than half the seeds); otherwise it says
that the premise is not met, with the numbers, so a rerun that changes the runs can never leave a stale reason.
"""
import dataclasses

from agentrl.ch10 import seed_means, ties
from agentrl.chapter import book_table_10_7
from agentrl.ch10.claims import HOLDS, TIED, by_key, count_phrase, entropy_end, entropy_start, metric, seed_rule


@dataclasses.dataclass(frozen=True)
class Explanation:
    """Our reading of one failing claim."""
    key: str  # the claim it explains (a key of agentrl.ch10.claims.CLAIMS)
    premise: str  # the measured fact the reading rests on, in words
    check: object  # (the runs of one seed, a tie tolerance or None) -> (premise true: bool, what was measured: str)
    text: str  # the reading, given the premise
    about_substrate: bool = True  # the premise is a property of the substrate (its RL base, its reward), not of the
    #                               loss's mathematics: a substrate where the claim flips tests it
    tied_on: tuple = ()  # (quantity, settings) whose spread over the seeds gives the premise's tie tolerance; () none

    def tolerance(self, runs_by_seed):
        """The premise's tie tolerance for one seed's numbers (ties.tolerance of one draw), or None."""
        if not self.tied_on:
            return None
        read, names = self.tied_on
        return ties.tolerance({name: [read(runs[name]) for runs in runs_by_seed] for name in names})

    def measure(self, runs_by_seed):
        """[(premise true, what was measured)] for each seed's runs."""
        tol = self.tolerance(runs_by_seed)
        return [self.check(runs, tol) for runs in runs_by_seed]


EXPLANATIONS = {}  # claim key -> Explanation; filled below


def _add(key, premise, check, text, about_substrate=True, tied_on=()):
    by_key(key)  # a typo in a key fails at import, not silently at render time
    EXPLANATIONS[key] = Explanation(key, premise, check, text, about_substrate, tied_on)


def _pass8(run):
    return metric(run, 'pass8')


def _invalid(run):
    return metric(run, 'invalid')


def _sheds_rare_tokens(runs, tol):
    r = runs['KL k3+ 1.0']
    lost, kl = entropy_start(r) - entropy_end(r), metric(r, 'kl_start')
    return lost > 2 * kl, f'entropy lost {lost:.3f} nats, KL from the start {kl:.3f}'


_add('kl-1.0-holds-entropy', 'the KL k3+ 1.0 run loses more than twice as many nats of entropy as its KL from the '
     'start', _sheds_rare_tokens,
     r'the penalty is the reverse KL, $\mathrm{KL}(\pi\,\|\,\pi_{\text{ref}})$. Dropping a rare token of mass $p$ '
     r'costs about $p$ nats of it but up to $p\log(1/p)$ of entropy, and the rare tokens our reward prunes are the '
     r'wrong line labels the RL base still offers; so even at $\beta = 1$ the entropy falls by more than 15% while '
     'the policy stays near its start.')


def _signal_kept(name):
    """Check: every step of the bonus run keeps a learning signal, and its entropy ends below its peak."""
    def check(runs, tol):
        r = runs[name]
        h = r['history']
        lost = sum(not step['signal'] for step in h)
        top = max(step['entropy'] for step in h)
        return (lost == 0 and entropy_end(r) < top,
                f'entropy {entropy_start(r):.3f}, peak {top:.3f}, end {entropy_end(r):.3f}; invalid calls up to '
                f'{max(step["invalid"] for step in h):.2f}; {lost} of {len(h)} steps without a signal')
    return check


_SIGNAL = ('every step of the run keeps a learning signal (some group of every batch has both a success and a '
           'failure), and its entropy ends below its peak')
_REWARD_WINS = ('the bonus moves some probability onto wrong and malformed calls, but the reward keeps pulling back, '
                'because some group of every batch still mixes successes and failures, and the entropy falls again. '
                r"The book's run reached the point where every episode fails, every advantage is zero and the bonus "
                r'acts alone; from there its entropy climbed to $\log V$.')
_add('bonus-breaks-format', _SIGNAL, _signal_kept('entropy 0.1'), _REWARD_WINS)
_add('bonus-0.1-breaks-format-in-80', _SIGNAL, _signal_kept('entropy 0.1, 80 steps'), _REWARD_WINS)


_add('bonus-0.2-breaks-format', _SIGNAL, _signal_kept('entropy 0.2'),
     'at 0.2 the entropy and the invalid calls do climb here, but within 40 steps no step loses its learning signal, '
     r'so the reward keeps pulling against the bonus and the run never reaches the all-fail regime from which the '
     r"book's entropy ran to $\log V$.")


def _invalid_calls(runs):
    """({setting: held-out invalid calls per episode} for the bonus 0.03 and temperature 1.3, none's, the evidence)."""
    base = metric(runs['none'], 'invalid')
    values = {name: metric(runs[name], 'invalid') for name in ('entropy 0.03', 'temperature 1.3')}
    return values, base, ('invalid calls ' + ', '.join(f'{n} {v:.2f}' for n, v in values.items())
                          + f', none {base:.2f}')


def _few_new_invalid_calls(runs, tol):
    values, base, measured = _invalid_calls(runs)
    return all(ties.compare(v, base, tol) != ties.HIGHER for v in values.values()), measured


_FORCED_WORDS = ('Our RL base is near-certain of every word the grammar forces (its slips only mislabel lines), so '
                 'extra entropy lands on alternatives the base already offered')
_INVALID_ARMS = ('none', 'entropy 0.03', 'temperature 1.3')
_add('bonus-and-temperature-move-away', 'the bonus-0.03 and temperature-1.3 runs make no more invalid calls per '
     'episode than the unregularised run (a gap below the tie tolerance is none)', _few_new_invalid_calls,
     'in the book both settings move away from the start mostly through malformed calls (0.04 invalid calls per '
     f'episode become 0.28 and 0.25). {_FORCED_WORDS}, which costs little KL from the start; collapsing less than '
     'the unregularised run, neither needs to end further from the start than it does.',
     tied_on=(_invalid, _INVALID_ARMS))


def _book_invalid(name):
    """The book's held-out invalid calls per episode for one setting (its section 10.7 table)."""
    _, rows = book_table_10_7()
    return float(next(row['invalid'] for row in rows if row['setting'] == name))


def _few_invalid_calls(runs, tol):
    values, _, measured = _invalid_calls(runs)
    return all(ties.compare(v, _book_invalid(name), tol) == ties.LOWER for name, v in values.items()), measured


_add('more-invalid-calls', 'the bonus-0.03 and temperature-1.3 runs each make fewer invalid calls per episode than '
     f"the book's {_book_invalid('entropy 0.03'):.2f} and {_book_invalid('temperature 1.3'):.2f}, by more than the "
     'tie tolerance', _few_invalid_calls,
     f'{_FORCED_WORDS[0].lower()}{_FORCED_WORDS[1:]}: a mild bonus or a temperature of 1.3 spreads probability over '
     'plausible wrong labels, not malformed calls, so the invalid calls stay near the unregularised run\'s and the '
     'seed decides which is higher.', tied_on=(_invalid, _INVALID_ARMS))


def _forward_pull(runs, tol):
    a, b = runs['KL k3 0.3'], runs['KL k3+ 0.3']
    return (ties.compare(entropy_end(a), entropy_end(b), tol) == ties.HIGHER,
            f'final entropy k3 {entropy_end(a):.3f}, k3+ {entropy_end(b):.3f}; KL from the start '
            f'{metric(a, "kl_start"):.3f}, {metric(b, "kl_start"):.3f}')


_add('estimators-agree', 'the plain-k3 run ends with more entropy than the k3+ run, by more than the tie tolerance',
     _forward_pull,
     r'the two losses have different gradients. Through its value, the $k_3$ loss gives '
     r'$(1 - \pi_{\text{ref}}/\pi)\,\nabla\log\pi$ per sampled token, whose mean under $\pi$ is '
     r'$-\mathbb{E}_{\pi_{\text{ref}}}[\nabla\log\pi]$, the gradient of the forward '
     r"$\mathrm{KL}(\pi_{\text{ref}}\,\|\,\pi)$ (notebook 03); $k_3^+$ is built to give the reverse KL's. The "
     'forward KL pulls probability back onto tokens the reference favours and the policy dropped, so the k3 run '
     'keeps more entropy, here more than the 0.05 nats the chapter\'s reading allows.', about_substrate=False,
     tied_on=(entropy_end, ('KL k3 0.3', 'KL k3+ 0.3')))


_KL_ARMS = ('KL k3+ 0.3', 'KL k3+ 1.0', 'KL k3 0.3', 'KL reward 0.3')


def _strong_kl_stalls(runs, tol):
    pass8 = {name: _pass8(runs[name]) for name in _KL_ARMS}
    reads = runs['KL k3+ 1.0']['history'][-1]['reads']
    others = [v for name, v in pass8.items() if name != 'KL k3+ 1.0']
    lowest = all(ties.compare(pass8['KL k3+ 1.0'], v, tol) == ties.LOWER for v in others)
    return (lowest and reads < 0.4,
            f'pass@8 {pass8["KL k3+ 1.0"]:.3f} (other KL runs {min(others):.3f}-{max(others):.3f}, none '
            f'{metric(runs["none"], "pass8"):.3f}); reads {reads:.2f} at the last step')


_add('kl-raises-pass8', 'KL k3+ 1.0 has a lower pass@8 than each of the other three KL runs, by more than the tie '
     'tolerance, and reads in fewer than 0.4 of its episodes at the last step', _strong_kl_stalls,
     r'at $\beta = 1$ the penalty holds our policy so near the RL base that it hardly learns to read before it '
     'edits (the book\'s run still reads 0.53 times per episode), and an edit without a read misses most held-out '
     'bugs, so coverage falls with pass@1; the other KL runs end near the unregularised pass@8.',
     tied_on=(_pass8, _KL_ARMS))


def explain(summary, runs_by_seed):
    """For a seed verdict (agentrl.ch10.claims.seed_verdict) that does not hold, with runs_by_seed[i] the runs of
    summary['seeds'][i] -> dict: key, text, verdict, held_on, tied_on, held (the bare check per seed), seeds, evidence
    (the claim's measured numbers on each seed), means (for a tied claim, seed_means.means_sentence), premise, premise_held (per seed), premise_evidence (per seed), premise_tolerance (its tie tolerance, or
    None where the premise compares no two settings) and explanation (None unless its premise
    holds by claims.seed_rule, or if we have no explanation for the claim)."""
    if summary['verdict'] == HOLDS:
        raise ValueError(f'claim {summary["key"]!r} holds ({summary["held_on"]} of {len(summary["seeds"])} seeds): '
                         'there is nothing to explain')
    if len(runs_by_seed) != len(summary['seeds']):
        raise ValueError(f'runs_by_seed has {len(runs_by_seed)} entries for {len(summary["seeds"])} seeds')
    claim = by_key(summary['key'])
    out = dict(key=claim.key, text=claim.text, verdict=summary['verdict'], held_on=summary['held_on'],
               tied_on=summary.get('tied_on', 0), held=list(summary['held']), seeds=list(summary['seeds']),
               evidence=[claim.evaluate(runs)[1] for runs in runs_by_seed],
               means=(seed_means.means_sentence(claim, runs_by_seed) if summary['verdict'] == TIED else None),
               premise=None, premise_held=None, premise_evidence=None, premise_tolerance=None, explanation=None)
    reading = EXPLANATIONS.get(claim.key)
    if reading is None:
        return out
    measured = reading.measure(runs_by_seed)
    held = [bool(ok) for ok, _ in measured]
    out.update(premise=reading.premise, premise_held=held, premise_evidence=[text for _, text in measured],
               premise_tolerance=reading.tolerance(runs_by_seed))
    if seed_rule(sum(held), len(held)) == HOLDS:
        out['explanation'] = reading.text
    return out


def ablation_sentence(row):
    """What a claim did in the per-turn-cost ablation (agentrl.ch10.turn_cost.judge's row), as a sentence."""
    return (f'On {row["n"]} seeds it is true on {row["held_on_with"]} with the per-turn cost ({row["with_cost"]}) '
            f'and on {row["held_on_without"]} without it ({row["without_cost"]}): {row["meaning"]}.')


def explanation_lines(found, ablation=()):
    """Markdown for explain()'s dicts: per claim one paragraph (how many seeds it holds on, then our reading or why we
    offer none, then what the same runs without the per-turn cost gave, from `ablation`'s rows), then what each seed
    measured, folded away in a <details> block holding a table. Nothing is nested in a list, where Markdown renderers
    differ on tables."""
    without = {row['key']: ablation_sentence(row) for row in ablation}
    lines = []
    for e in found:
        n = len(e['seeds'])
        said = f'*{e["text"]}*: {count_phrase(e)}.' + (f' {e["means"]}' if e.get('means') else '')
        if e['key'] in without:
            said += ' ' + without[e['key']]
        if e['premise'] is None:
            lines += [f'{said} We have no reading to offer for this one.', '']
            lines += _numbers(e, [('the claim', e['evidence'])])
            continue
        on = f'{sum(e["premise_held"])} of {n} seeds'
        premise = e['premise']
        if e.get('premise_tolerance') is not None:
            premise += f' (the tie tolerance of one seed\'s numbers here: {e["premise_tolerance"]:.3f})'
        if e['explanation']:
            lines.append(f'{said} **Our reading:** {e["explanation"]} It rests on this, true on {on}: {premise}.')
        else:
            lines.append(f'{said} The reading we would offer rests on this: {premise}. It is true on only {on}, '
                         'so we do not offer it.')
        lines.append('')
        premise = [f'{"yes" if held else "no"}: {text}' for held, text in zip(e['premise_held'], e['premise_evidence'])]
        lines += _numbers(e, [('the claim', e['evidence']), ('what the reading rests on', premise)])
    return lines


def _numbers(e, columns):
    """The per-seed numbers of one claim, as a <details> block holding a Markdown table."""
    head = ' | '.join(name for name, _ in columns)
    rows = [f'| {seed} | ' + ' | '.join(values[i] for _, values in columns) + ' |' for i, seed in enumerate(e['seeds'])]
    return ['<details><summary>what each seed measured</summary>', '', f'| seed | {head} |',
            '|' + '---|' * (len(columns) + 1), *rows, '', '</details>', '']
