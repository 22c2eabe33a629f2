"""The chapter's map: which notebook reproduces which section, the book's printed blocks, and the keys under which a
notebook records its own lines and results.

The book's printed lines come from data/book/chapter10.json (agentrl.paths.BOOK_OUTPUTS); a notebook records its
lines for the same block with agentrl.results, under the key named here, as a list of strings. The report, the
tests and the notebooks read this one table.
"""
import dataclasses
import json
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
    ('12_framework_options', "What the RL frameworks ship: KL, aggregation, entropy and ratio options, computed exactly and run on TinyAgent",
     ('off_policy_kl', 'two_token_kl', 'aggregation_scales', 'ratio_losses', 'sampler_correction', 'option_runs',
      'option_claims')),
    ('13_engine', 'Appendix: the GRPO engine behind the TinyAgent runs, and the regularisers as its plug-ins', ()),
    ('14_real_model', "The chapter's distribution facts on a real language model, SmolLM2-135M-Instruct",
     ('real_moments', 'real_moment_medians', 'real_sequences', 'real_k3_numerics', 'real_gradients',
      'real_gradient_distance', 'real_covariance', 'real_entropy_bonus')),
    ('15_real_grpo', "Entropy collapse on a real language model: GRPO on SmolLM2-135M-Instruct, the chapter's "
     'regularisers on seeds', ('found', 'real_runs', 'crossings')),
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
STABILITY_KEY = 'stability'  # notebook 09: agentrl.ch10.stability.stability rows, the verdicts on other arithmetic streams
ACROSS_NOTEBOOK = '11_substrates'  # the claims judged on several substrates (agentrl.ch10.across)
SUBSTRATES_KEY = 'substrates'  # notebook 11: a line per known substrate, swept or not (its printed block)
CLAIM_TABLE_KEY = 'claim_table'  # notebook 11: agentrl.ch10.across.claim_table rows
SUBSTRATE_FACTS_KEY = 'substrate_facts'  # notebook 11: agentrl.calibration.substrates.substrate_facts dicts

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
    raise KeyError(f'no section {number!r} in agentrl.chapter; known: {", ".join(s.number for s in SECTIONS)}')


@lru_cache(maxsize=1)
def book_blocks():
    """Every book block in the book's order, joined with SECTIONS (a mismatch in block counts raises)."""
    found = []
    for raw in book_data()['blocks']:
        entry = section(raw['section'])
        if raw['block'] >= len(entry.block_keys):
            raise ValueError(f'the book has block {raw["block"]} in {entry.number}, SECTIONS names only '
                             f'{len(entry.block_keys)}')
        if len(raw['exact']) != len(raw['lines']):
            raise ValueError(f'{entry.number} block {raw["block"]}: one exactness flag per line expected')
        found.append(BookBlock(entry.number, raw['block'], tuple(raw['lines']), tuple(raw['exact']),
                               entry.notebook, entry.block_keys[raw['block']]))
    for entry in SECTIONS:
        have = sum(block.section == entry.number for block in found)
        if have != len(entry.block_keys):
            raise ValueError(f'{entry.number}: SECTIONS names {len(entry.block_keys)} blocks, the book has {have}')
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
