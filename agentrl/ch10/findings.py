"""What the TinyAgent notebooks found, gathered from the runs and written as the bullets a notebook opens with.

`evidence` loads (or trains, through the executor) every run the chapter's claims read on the verdict rule's seeds,
the same runs with no per-turn cost, and judges them: five-seed verdicts, their stability against the recorded
arithmetic streams, and the ablation's outcomes. The `*_bullets` functions turn that record into sentences; they
compute nothing themselves beyond counting.
"""
import dataclasses

from agentrl.ch10 import across, claims, explanations, stability, turn_cost
from agentrl.ch10.live import run_all
from agentrl.prose import and_join

SEEDS = (0, 1, 2, 3, 4)  # the verdict rule's seeds


@dataclasses.dataclass
class Evidence:
    """The five-seed record every TinyAgent notebook reads its findings from."""
    seeds: tuple  # the seeds judged
    runs_by_seed: list  # runs_by_seed[i]: the runs of seeds[i], under the names the claims use
    verdicts: list  # claims.seed_verdict dicts, every claim whose runs are here
    stability: list  # stability.stability rows of those verdicts against data/streams/
    ablation: list  # turn_cost.judge rows: each failing or fragile claim without the per-turn cost

    def verdict(self, key):
        return next(v for v in self.verdicts if v['key'] == key)

    def fragile(self):
        """Keys of the verdicts whose word moves on another arithmetic stream."""
        return [row['key'] for row in self.stability if row['label'] == stability.FRAGILE]

    def stability_row(self, key):
        return next(row for row in self.stability if row['key'] == key)

    def ablation_row(self, key):
        return next((row for row in self.ablation if row['key'] == key), None)


def evidence(seeds=SEEDS, processes=2, executor=None):
    """Load or train every run the claims read on `seeds`, with and without the per-turn cost, and judge them."""
    seeds = tuple(seeds)
    runs = run_all(across.seed_specs(seeds), processes=processes, executor=executor)
    by_seed = [across.runs_of_seed(runs, seed) for seed in seeds]
    verdicts = [v for v in (claims.seed_verdict(claim, by_seed, seeds) for claim in claims.CLAIMS) if v is not None]
    rows = stability.stability(verdicts, stability.recorded_streams(), claims.seed_rule)
    judged = turn_cost.judged_claims(verdicts, [row['key'] for row in rows if row['label'] == stability.FRAGILE])
    ablation_runs = run_all(turn_cost.ablation_specs([v['key'] for v in judged], seeds), processes=processes,
                            executor=executor)
    ablation = turn_cost.judge(judged, turn_cost.runs_by_seed(ablation_runs, seeds), seeds)
    return Evidence(seeds, by_seed, verdicts, rows, ablation)


def count_words(verdicts):
    """'5 of 8 hold' for a list of seed verdicts ('5 of 8 hold, 1 tied' when some are tied)."""
    held = sum(v['verdict'] == claims.HOLDS for v in verdicts)
    tied = sum(v['verdict'] == claims.TIED for v in verdicts)
    return f'{held} of {len(verdicts)} hold' + (f', {tied} tied' if tied else '')


def verdict_phrase(found, v):
    """'true on 2 of 5 seeds' with, for a fragile verdict, the other stream's count."""
    phrase = f'true on {v["held_on"]} of {len(v["seeds"])} seeds' + (
        f', tied on {v["tied_on"]} (its bare check, the noise set aside, came out the claimed way on '
        f'{sum(v["held"])} of {len(v["seeds"])})' if v.get('tied_on') else '')
    row = found.stability_row(v['key'])
    if row['label'] == stability.FRAGILE:
        phrase += f'; fragile: {stability.fragile_phrase(row)[len("fragile: "):]}'
    return phrase


def claim_bullet(found, key, reading=None):
    """One failing or fragile claim: its verdict, our reading (if any) and the ablation's outcome."""
    v = found.verdict(key)
    parts = [f'*{v["text"]}*: {verdict_phrase(found, v)}.']
    if reading:
        parts.append(f'Our reading: {reading}')
    row = found.ablation_row(key)
    if row is not None:
        parts.append(explanations.ablation_sentence(row))
    return ' '.join(parts)


def single_draw_sentence(seed_verdicts, found, seed):
    """How seed `seed`'s own checks (claims.verdicts dicts) compare with the five-seed verdicts of the same claims."""
    by_key = {v['key']: v for v in found.verdicts}
    compared = [v for v in seed_verdicts if v['key'] in by_key]
    words = {v['key']: claims.outcome_of(v) for v in compared}
    tied = [v for v in compared if words[v['key']] == claims.TIED]
    decided = [v for v in compared if words[v['key']] != claims.TIED]
    settled = (claims.HOLDS, claims.DOES_NOT_HOLD)  # a tied or seed-dependent verdict has no side to be opposite to
    differ = [v for v in decided
              if by_key[v['key']]['verdict'] in settled and words[v['key']] != by_key[v['key']]['verdict']]
    open_ = [v for v in decided if by_key[v['key']]['verdict'] not in settled]
    head = (f'Seed {seed}, the chapter\'s single run per setting, is one draw: on it '
            f'{sum(words[v["key"]] == claims.HOLDS for v in compared)} of these {len(compared)} statements come out '
            'true')
    if tied:
        head += (f', {len(tied)} tied (a gap inside the one-draw tolerance, so this draw decides nothing: '
                 + and_join(f'*{v["text"]}*' for v in tied) + ')')
    left = (f'; {len(open_)} the five seeds leave tied or seed-dependent, so this draw\'s word on '
            f'{"it" if len(open_) == 1 else "them"} is one draw\'s only') if open_ else ''
    if not differ:
        return head + left + ('; every other one' if tied or open_ else ',') + ' as the five-seed verdict has it.'
    return (head + left + f'; on {len(differ)} it says the opposite of the five-seed verdict ('
            + and_join(f'*{by_key[v["key"]]["text"]}*' for v in differ) + ').')


def ablation_summary(found):
    """One sentence over the ablation's outcomes."""
    letters = [row['outcome'] for row in found.ablation]
    parts = []
    for letter, one, many in (('a', 'holds once the cost is gone (the cost is a candidate cause)',
                               'hold once the cost is gone (the cost is a candidate cause)'),
                              ('b', 'fails without it too', 'fail without it too'),
                              ('c', 'holds only with the cost', 'hold only with the cost'),
                              ('d', 'holds with or without it', 'hold with or without it')):
        count = letters.count(letter)
        if count:
            parts.append(f'{count} {one if count == 1 else many}')
    undecided = letters.count('?')
    if undecided:
        parts.append(f'{undecided} {"is" if undecided == 1 else "are"} tied or seed-dependent without it')
    return (f'Trained again with no per-turn cost (our substrate\'s one addition to the chapter\'s GRPO), of the '
            f'{len(letters)} statements that fail, are tied or are fragile here, ' + and_join(parts) + '.')


def table_claims(found):
    """The verdicts of the book's readings of its 10.7 table: claims whose runs are all among the nine settings."""
    return [v for v in found.verdicts
            if v['kind'] != claims.AT_SCALE and set(claims.by_key(v['key']).needs) <= set(claims.CHAPTER_ARMS)]


def comparison_bullets(found, seed_verdicts, seed, readings=None):
    """Markdown bullets for notebook 07's opening: what held on five seeds, what did not and our reading, what is
    fragile, what the per-turn cost ablation says, and seed `seed` as one draw. readings: {claim key: our reading}
    (agentrl.ch10.explanations, shown only where its premise holds)."""
    readings = readings or {}
    judged = table_claims(found)
    n = len(found.seeds)
    kinds = []
    for kind, label in ((claims.MECHANISM, 'mechanisms the book demonstrates'),
                        (claims.OBSERVATION, 'softer readings of its one-seed table')):
        of_kind = [v for v in judged if v['kind'] == kind]
        kinds.append(f'{count_words(of_kind)} of the {label}')
    bullets = [f'**On {n} seeds** ({claims.seed_rule_text(n)}), {and_join(kinds)}.']
    failing = [v for v in judged if v['verdict'] not in (claims.HOLDS, claims.TIED)]
    if failing:
        bullets.append(f'**Not reproduced here ({len(failing)}):**' + ''.join(
            f'\n  - {claim_bullet(found, v["key"], readings.get(v["key"]))}' for v in failing))
    tied = [v for v in judged if v['verdict'] == claims.TIED]
    if tied:
        bullets.append(f'**Tied: inside the noise on too many seeds to say ({len(tied)}):**' + ''.join(
            f'\n  - {claim_bullet(found, v["key"])}' for v in tied))
    shaky = [v for v in judged if v['verdict'] == claims.HOLDS and v['key'] in found.fragile()]
    if shaky:
        bullets.append(f'**Holding by a hair ({len(shaky)}):**' + ''.join(
            f'\n  - {claim_bullet(found, v["key"])}' for v in shaky))
    if found.ablation:
        bullets.append('**The per-turn cost.** ' + ablation_summary(found))
    bullets.append(single_draw_sentence(seed_verdicts, found, seed))
    return '\n'.join(f'- {bullet}' for bullet in bullets)


def readings_where_premise_holds(found, failing_keys):
    """{claim key: our reading} for the failing claims whose reading's premise holds on the seeds."""
    out = {}
    for key in failing_keys:
        e = explanations.explain(found.verdict(key), found.runs_by_seed)
        if e['explanation']:
            out[key] = e['explanation']
    return out


def summary_bullets(found, seed_verdicts, seed):
    """Markdown: notebook 07's closing restatement of its findings, shorter than the opening."""
    judged = table_claims(found)
    n = len(found.seeds)
    failing = [v for v in judged if v['verdict'] not in (claims.HOLDS, claims.TIED)]
    bullets = [f'Of the book\'s {len(judged)} readings of its 10.7 table, {count_words(judged)} on {n} seeds by the '
               'majority rule.']
    if failing:
        bullets.append('Not reproduced on our TinyAgent: ' + and_join(
            f'*{v["text"]}* ({v["held_on"]} of {n})' for v in failing) + '.')
    tied = [v for v in judged if v['verdict'] == claims.TIED]
    if tied:
        bullets.append('Tied, neither reproduced nor refuted: ' + and_join(
            f'*{v["text"]}* ({v["held_on"]} of {n}, tied on {v["tied_on"]})' for v in tied) + '.')
    if found.ablation:
        bullets.append(ablation_summary(found))
    bullets.append(single_draw_sentence(seed_verdicts, found, seed))
    return '\n'.join(f'- {bullet}' for bullet in bullets)


PENDING = '*Filled in by the summary at the end of this notebook, from what the cells below compute.*'

