"""Which notebook reproduces which section of chapter 10, and under which result key each book output block lives.

One table, read by the report (agentrl.build.report), the tests and the Makefile. The book's printed lines come
from data/book/chapter10.json (see agentrl.paths.BOOK_OUTPUTS); the lines we print for the same block are recorded
by the notebook with agentrl.results under the key named here, as a list of strings.

Usage: python -m agentrl.build.registry (--chapter | --beyond | --all) [--stems]
prints the make targets (nb-<notebook>) of the notebooks that reproduce the chapter (sections 10.1-10.8), of those
that go beyond it (notebooks 09 and 10), or of all of them; --stems prints the notebook file stems instead.
"""
import argparse
import dataclasses
import json
import sys
from functools import lru_cache

from agentrl.paths import BOOK_OUTPUTS


@dataclasses.dataclass(frozen=True)
class Section:
    """A section of the chapter: its number, our English title, its notebook, and one result key per book block."""
    number: str
    title: str
    notebook: str
    block_keys: tuple  # block_keys[i]: the key under which the notebook records its lines for the book's block i


SECTIONS = (
    Section('10.1', 'The reference policy', '01_bandit_closed_form', ('tilted_optima', 'optimum_check')),
    Section('10.2', 'Estimating KL from samples', '02_estimator_moments', ('estimator_moments',)),
    Section('10.3', 'Gradients of the estimators as losses', '03_loss_gradients',
            ('loss_gradients', 'gradient_error_by_distance')),
    Section('10.4', 'KL in the reward vs in the loss', '04_reward_vs_loss', ('placement_errors',)),
    Section('10.5', 'Forward and reverse KL', '05_forward_reverse', ('forward_reverse_fits',)),
    Section('10.6', 'Entropy collapse', '06_entropy_collapse',
            ('covariance_check', 'three_step_identity', 'clip_higher')),
    Section('10.7', 'Comparing the regularisers on TinyAgent', '07_tinyagent_comparison', ('comparison',)),
    Section('10.8', 'Design questions in practice', '08_design_questions',
            ('collapse_trajectories', 'kl_logs', 'reference_memory', 'reference_reset')),
)

# Notebooks beyond the book: (file stem, title, the keys of the printed blocks the notebook records, in order).
# Nothing in the book to match; the report shows these blocks as printed.
BEYOND = (
    ('09_seeds', 'Seeds, Clip-Cov and KL-Cov, adaptive KL, the entropy-performance law, the covariance mechanism',
     ('fraction_sweep', 'adaptive_kl', 'seed_table', 'seed_claims', 'scale_recheck', 'entropy_law',
      'covariance_mechanism')),
    ('10_exercises', 'The exercises', ('exercise_1', 'exercise_2', 'exercise_4', 'exercise_3')),
    ('11_substrates', "The chapter's claims on six substrates", ('substrates',)),  # SUBSTRATES_KEY
)

# Structured results besides the printed blocks. Claim verdicts (agentrl.ch10.claims.verdicts: a list of dicts)
# under VERDICTS_KEY in each of VERDICT_NOTEBOOKS; notebook 09's seed summary of the 10.7 settings (label, seeds,
# columns, rows of setting + printed cells + per-seed values) and its per-seed claim checks
# (agentrl.ch10.claims.seed_verdict dicts) for the chapter's settings and for the re-checks at twice the scale.
VERDICTS_KEY = 'verdicts'
VERDICT_NOTEBOOKS = ('07_tinyagent_comparison', '08_design_questions')
SEED_NOTEBOOK = '09_seeds'
SEED_SUMMARY_KEY = 'seed_summary'
SEED_VERDICTS_KEY = 'seed_verdicts'
SCALE_VERDICTS_KEY = 'scale_verdicts'
EXPLANATIONS_KEY = 'explanations'  # notebook 09: agentrl.ch10.explanations.explain dicts, one per claim not holding
ACROSS_NOTEBOOK = '11_substrates'  # the claims judged on several substrates (agentrl.ch10.across)
SUBSTRATES_KEY = 'substrates'  # notebook 11: a line per known substrate, swept or not (its printed block)
CLAIM_TABLE_KEY = 'claim_table'  # notebook 11: agentrl.ch10.across.claim_table rows
SUBSTRATE_FACTS_KEY = 'substrate_facts'  # notebook 11: agentrl.build.substrate_sweep.substrate_facts dicts

# Each notebook's parameters as its committed `parameters` cell assigns them, in order (tests/test_side_runs.py
# keeps the two equal). A run with any other value is a side run (agentrl.build.side_runs): it writes aside.
PARAMETERS = {
    '01_bandit_closed_form': {'seed': 0},
    '02_estimator_moments': {'seed': 0},
    '03_loss_gradients': {'seed': 0},
    '04_reward_vs_loss': {'seed': 0},
    '05_forward_reverse': {'seed': 0},
    '06_entropy_collapse': {'seed': 0},
    '07_tinyagent_comparison': {'seed': 0, 'processes': 2},
    '08_design_questions': {'seed': 0, 'processes': 2},
    '09_seeds': {'seed': 0, 'seeds': [0, 1, 2, 3, 4], 'processes': 2},
    '10_exercises': {'seed': 0, 'processes': 2},
    '11_substrates': {'seed': 0},
}


def committed_parameters(notebook):
    """The committed parameters of a notebook (file stem) as {name: value}; an unknown notebook raises."""
    if notebook not in PARAMETERS:
        raise KeyError(f'no committed parameters for notebook {notebook!r}; the registry knows: '
                       f'{", ".join(PARAMETERS)}')
    return PARAMETERS[notebook]


@dataclasses.dataclass(frozen=True)
class BookBlock:
    """One 'Output:' block of the book, with where our notebook records the same block."""
    section: str
    index: int  # the block's position among its section's blocks, from 0
    lines: tuple  # the book's lines, white space collapsed
    exact: tuple  # per line: True for exact arithmetic (must match to the character), False for a measurement
    notebook: str
    key: str

    def label(self):
        """'10.6 block 1' style name for messages."""
        return f'{self.section} block {self.index}'


@lru_cache(maxsize=1)
def book_data():
    """The parsed data/book/chapter10.json."""
    return json.loads(BOOK_OUTPUTS.read_text(encoding='utf-8'))


def section(number):
    """The Section with this number ('10.3')."""
    for entry in SECTIONS:
        if entry.number == number:
            return entry
    raise KeyError(f'no section {number!r} in the registry; known: {", ".join(s.number for s in SECTIONS)}')


@lru_cache(maxsize=1)
def book_blocks():
    """Every book block in the book's order, joined with the registry (a mismatch in block counts raises)."""
    found = []
    for raw in book_data()['blocks']:
        entry = section(raw['section'])
        if raw['block'] >= len(entry.block_keys):
            raise ValueError(f'the book has block {raw["block"]} in {entry.number}, the registry names only '
                             f'{len(entry.block_keys)}')
        if len(raw['exact']) != len(raw['lines']):
            raise ValueError(f'{entry.number} block {raw["block"]}: one exactness flag per line expected')
        found.append(BookBlock(entry.number, raw['block'], tuple(raw['lines']), tuple(raw['exact']),
                               entry.notebook, entry.block_keys[raw['block']]))
    for entry in SECTIONS:
        have = sum(block.section == entry.number for block in found)
        if have != len(entry.block_keys):
            raise ValueError(f'{entry.number}: the registry names {len(entry.block_keys)} blocks, the book has {have}')
    return tuple(found)


def blocks_of(number):
    """The book blocks of one section."""
    return [block for block in book_blocks() if block.section == number]


def exact_blocks():
    """The book blocks with at least one exact line."""
    return [block for block in book_blocks() if any(block.exact)]


def book_table_10_7():
    """The book's 10.7 table: (column names, [row dicts keyed by column name])."""
    table = book_data()['table_10_7']
    return table['columns'], table['rows']


def chapter_notebooks():
    """File stems of the notebooks that reproduce the chapter, in section order."""
    return list(dict.fromkeys(entry.notebook for entry in SECTIONS))


def beyond_notebooks():
    """File stems of the notebooks that go beyond the book."""
    return [stem for stem, _, _ in BEYOND]


def collapse(line):
    """A printed line with its runs of white space folded to one space: how the book's lines are stored."""
    return ' '.join(line.split())


def main(argv=None):
    """Command-line entry: print make targets or notebook stems, space-separated, on one line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument('--chapter', action='store_true', help='the notebooks of sections 10.1-10.8')
    which.add_argument('--beyond', action='store_true', help='the notebooks beyond the book')
    which.add_argument('--all', action='store_true', help='every notebook of the registry')
    parser.add_argument('--stems', action='store_true', help='print notebook file stems, not make targets')
    args = parser.parse_args(argv)
    stems = (chapter_notebooks() if args.chapter else beyond_notebooks() if args.beyond
             else chapter_notebooks() + beyond_notebooks())
    print(' '.join(stems if args.stems else [f'nb-{stem}' for stem in stems]))
    return 0


if __name__ == '__main__':
    sys.exit(main())
