"""How our TinyAgent differs from the book's: the page TINYAGENT.md, written from the calibration records.

`load_records` reads what the page needs from the committed records (the studies' trials.json and README.md, the
arithmetic report, the calibration rows, the gym's grammars and the sandbox's own description); `page` turns those
records into Markdown lines, computing nothing that is not in them except the worked example of the per-turn cost,
which it asks of the engine (agentrl.calibration.fit.turn_cost_example). machinery/report.py writes the page.
"""
import json
import re
from pathlib import Path

from agentrl.calibration import measure
from agentrl.calibration.fit import (EXAMPLE_EPISODE, EXAMPLE_REWARDS, EXAMPLE_TURNS, _span, number_word,
                                    turn_cost_example)
from agentrl.calibration.freeze import decision_from_export
from agentrl.calibration.rows import ROWS, fitted_counts
from agentrl.calibration.substrates import FIRST_STUDY, LONG_STUDY, SOURCES, source, trial_record
from agentrl.paths import REPO
from agentrl.substrate import sandbox
from agentrl.substrate.config import SubstrateConfig
from agentrl.substrate.gym import GRAMMARS

PAGE = 'TINYAGENT.md'  # relative to the repository
ARITHMETIC_REPORT = 'reports/calibrate-arithmetic.md'  # `make calibrate` on trial 45 after the arithmetic changed
BOOK_GRAMMAR = 'long'  # the book spells its calls out (`read L2 to L5 ;`); the long-grammar study searched for it


def importances(readme_text):
    """[(parameter, importance)] in the order of the 'Which parameters mattered' table of a study's README, [] if
    it has none yet."""
    section = readme_text.split('## Which parameters mattered', 1)[-1].split('\n## ', 1)[0]
    return [(name, float(value)) for name, value in re.findall(r'^\| (\w+) \| ([0-9.]+) \|$', section, re.M)]


def search_range(readme_text, parameter):
    """(low, high) of a float parameter's range in a study's README protocol line ('`turn_cost` 0-0.5')."""
    found = re.search(rf'`{parameter}` (\d+(?:\.\d+)?)-(\d+(?:\.\d+)?)', readme_text)
    if found is None:
        raise LookupError(f'no range of {parameter} in the study README')
    return float(found.group(1)), float(found.group(2))


def arithmetic_counts(text):
    """{'search': rows held, 'confirmation': rows held, 'title': the report's heading} from the arithmetic report."""
    out = dict(title=text.splitlines()[0].lstrip('# ').strip())
    for key, heading in (('search', '## Search seeds'), ('confirmation', '## Confirmation seeds')):
        section = text.split(heading, 1)[1].split('\n## ', 1)[0]
        out[key] = int(re.search(r'^(\d+) of (\d+) rows hold', section, re.M).group(1))
    return out


def substrate_record(name, repo=REPO):
    """What the page says of one substrate, from its study's trials.json."""
    record, where = trial_record(name, repo), source(name)
    config = SubstrateConfig.from_description(record['config'])
    means = {row['quantity']: row['mean'] for row in record['rows']}
    confirmation = record.get('confirmation') or {}
    return dict(name=name, label=where.label, study=where.study, trial=record['number'], grammar=config.grammar,
                turn_cost=config.turn_cost, rl_lr=config.rl_lr, vocab=means[ROWS[0].quantity],
                rows=len(record['rows']), rows_held=record['rows_held'], seeds=record['seeds'],
                confirmation_rows_held=confirmation.get('rows_held'), confirmation_seeds=confirmation.get('seeds'))


def study_record(study, repo=REPO):
    """The freeze decision and the importance table of one study, from its trials.json and README.md."""
    export = json.loads((Path(repo) / study / 'trials.json').read_text())
    decision, _ = decision_from_export(export)
    readme = (Path(repo) / study / 'README.md').read_text(encoding='utf-8')
    return dict(study=study, frozen=decision.frozen, confirmed=decision.confirmed, compared=decision.compared,
                confirm_rows=export['attrs'].get('confirm_rows'), importances=importances(readme),
                turn_cost_range=search_range(readme, 'turn_cost'))


def load_records(repo=REPO):
    """Everything the page is written from, read from the committed records."""
    repo = Path(repo)
    counts = fitted_counts()
    return dict(
        substrates=[substrate_record(s.name, repo) for s in SOURCES],
        studies={study: study_record(study, repo) for study in (FIRST_STUDY, LONG_STUDY)},
        arithmetic=dict(arithmetic_counts((repo / ARITHMETIC_REPORT).read_text(encoding='utf-8')),
                        path=ARITHMETIC_REPORT),
        rows=dict(total=len(ROWS), **counts, book_vocab=int(ROWS[0].book.replace(',', ''))),
        push=dict(updates=measure.PUSH_UPDATES, lr=measure.PUSH_LR, clip_high=measure.PUSH_CLIP),
        grammars={name: dict(read=g.spell('read', 'L2', 'L5') + ' ;', edit=g.spell('edit', 'L4', '<', '>') + ' ;',
                             forced=list(g.words)) for name, g in GRAMMARS.items()},
        book_grammar=BOOK_GRAMMAR,
        sandbox_guards=re.findall(r'^\d\. \*\*(.+?)\.\*\*', sandbox.__doc__, re.M),
    )


def default_substrate(records):
    """The record of the first study's frozen trial (the default substrate)."""
    frozen = records['studies'][FIRST_STUDY]['frozen']
    return next(s for s in records['substrates'] if s['study'] == FIRST_STUDY and s['trial'] == frozen)


def confirmation_sentence(records):
    """What the default substrate's counts on seeds 5-9 mean, at search time and with today's arithmetic."""
    default, study, today = default_substrate(records), records['studies'][FIRST_STUDY], records['arithmetic']
    seeds, confirm = _span(default['seeds']), _span(default['confirmation_seeds'])
    selected = (f"the freeze rule's fallback measured the best {number_word(study['compared'])} trials on them and froze the "
                f"one holding the most rows there, so trial {default['trial']}'s count there is the maximum of "
                f"{number_word(study['compared'])} counts selected on those seeds, not an untouched score"
                if not study['confirmed'] else 'the freeze rule confirmed it there')
    return (f"Seeds {confirm} are the confirmation seeds: the search never trained on them, but {selected}. At search "
            f"time trial {default['trial']} held {default['rows_held']} of {default['rows']} rows on seeds {seeds} and "
            f"{default['confirmation_rows_held']} on seeds {confirm}; regenerated with today's arithmetic "
            f"(`{today['path']}`) it holds {today['search']} and {today['confirmation']}.")


def fitted_sentence(records):
    """What was fitted and what was held out, in one sentence."""
    rows, push = records['rows'], records['push']
    return (f"The fit used bands around {rows['total']} of the book's numbers ({rows['output']} printed in chapter "
            f"10's output blocks, {rows['prose']} stated in its prose, {rows['derived']} derived from those; "
            "`agentrl/calibration/rows.py` lists each): the RL base, the unregularised run `none`, and the single "
            f"10.6 batch at clip_high {push['clip_high']}, pushed at 10.6's own learning rate {push['lr']:g} for "
            f"{push['updates']} full-batch steps. Only the regularised settings were held out.")


def page(records):
    """The page TINYAGENT.md as Markdown lines, from load_records' records."""
    subs, first = records['substrates'], records['studies'][FIRST_STUDY]
    default = default_substrate(records)
    low, high = first['turn_cost_range']
    plain, _ = turn_cost_example(0.0)
    out = ['# How our TinyAgent differs from the book\'s', '',
           'Written by `make report` (`python -m machinery.report`, through `agentrl/calibration/differences.py`) '
           'from the calibration records (`calibration/`, `calibration/long-grammar/`, '
           f'`{records["arithmetic"]["path"]}`); do not edit by hand. The book\'s chapters 1–9, where its TinyAgent '
           'is built, are not available: ours is a small model trained from scratch and fitted to numbers chapter 10 '
           'shows. Six substrates appear in the notebooks (notebook 11 sweeps them); trial '
           f'{default["trial"]} is the default.', '',
           '## The per-turn cost', '',
           'Our GRPO charges `turn_cost` advantage units for each turn an episode takes above its group\'s mean, in '
           'groups whose rewards differ. At 0 the engine is the chapter\'s group-normalised GRPO; the book\'s GRPO has '
           'no such term. The search fitted it with the rest of the substrate, in the range '
           f'{low:g}–{high:g}. Its worked example (`agentrl/calibration/fit.py`, computed here by the engine): in a '
           f'group of {len(EXAMPLE_REWARDS)} with {int(sum(EXAMPLE_REWARDS))} success whose episodes average '
           f'{sum(EXAMPLE_TURNS) / len(EXAMPLE_TURNS):g} turns, the failed episode that took '
           f'{EXAMPLE_TURNS[EXAMPLE_EPISODE]} turns gets advantage {plain:+.3f} without the cost.', '',
           '| substrate | study | call grammar | turn_cost | below the range\'s upper edge by | the failed episode\'s '
           'advantage |', '|---|---|---|---|---|---|']
    for s in subs:
        _, costly = turn_cost_example(s['turn_cost'])
        out.append(f'| trial {s["trial"]} | `{s["study"]}/` | {s["grammar"]} | {s["turn_cost"]:.3f} | '
                   f'{high - s["turn_cost"]:.3f} | {costly:+.3f} |')
    out.append('')
    for study in records['studies'].values():
        ranked = [name for name, _ in study['importances']]
        if 'turn_cost' in ranked:
            value = dict(study['importances'])['turn_cost']
            out.append(f'- In the study `{study["study"]}/`, Optuna\'s importance of `turn_cost` is {value:.3f}, '
                       f'rank {ranked.index("turn_cost") + 1} of the {len(ranked)} parameters (its `README.md`).')
    out += ['', '## Vocabulary, calls and sandbox', '']
    vocabs = sorted({round(s['vocab']) for s in subs})
    out.append(f'- **Vocabulary**: ours has {" or ".join(map(str, vocabs))} words (the calibration row '
               f'`{ROWS[0].quantity}`, per substrate), the book\'s {records["rows"]["book_vocab"]}: one id per word '
               'of the gym (code, tool syntax, observations, special tokens).')
    grammars, book = records['grammars'], records['book_grammar']
    by_grammar = {g: [f'trial {s["trial"]}' for s in subs if s['grammar'] == g] for g in grammars}
    out.append('- **Call grammar**: ' + '; '.join(
        f'the {g} one (`{grammars[g]["read"]}`, `{grammars[g]["edit"]}`'
        + ('; the book\'s' if g == book else '') + f') on {", ".join(by_grammar[g]) or "no substrate"}'
        for g in grammars) + '. The long one forces the words ' + ', '.join(f'`{w}`' for w in grammars['long']['forced'])
        + ': more words per call, more of them forced by the grammar.')
    out.append('- **Sandbox**: the hidden tests of an edited function run behind our own guards '
               f'({"; ".join(g.lower() for g in records["sandbox_guards"])}; `agentrl/substrate/sandbox.py`); a '
               'time-out or a crash fails the episode and never stops training.')
    out += ['', '## Fitted and held out', '', fitted_sentence(records), '',
            'So where our `none` agrees with the book, that agreement is what the fit aimed for, not evidence; the '
            'regularised settings are the test. The RL learning rate of the runs is each substrate\'s own (trial '
            f'{default["trial"]}: {default["rl_lr"]:.2e}), fitted too.', '',
            '## The confirmation seeds', '', confirmation_sentence(records), '',
            '| substrate | rows held, search seeds | rows held, confirmation seeds |', '|---|---|---|']
    for s in subs:
        confirmed = 'not measured' if s['confirmation_rows_held'] is None else \
            f'{s["confirmation_rows_held"]} of {s["rows"]} (seeds {_span(s["confirmation_seeds"])})'
        out.append(f'| trial {s["trial"]} | {s["rows_held"]} of {s["rows"]} (seeds {_span(s["seeds"])}) | {confirmed} |')
    return out + ['']


def page_text(records):
    return '\n'.join(page(records))
