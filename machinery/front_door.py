"""The README's first screen: what holds and what does not, in at most six lines counted from the records.

The lines are written between BEGIN and END in README.md. Every count comes from a committed record: the exact lines
from results/ set beside the book's printed lines (data/book/chapter10.json), the TinyAgent claims from notebook
09's seed verdicts and stability rows (results/09_seeds.json) and 10.6's reading from notebook 06, the real model's
statements from notebook 14 (results/14_real_model.json) and its GRPO claims from notebook 15 (results/15_real_grpo.json),
once they are judged. Verdict words are counted as recorded, whatever they are,
so a word the claims code adds later (a tie, say) shows up with its count instead of being folded into another; the
kinds of claim are likewise read from the records, not assumed.

    python -m machinery.front_door           # print the lines
    python -m machinery.front_door --write   # and write them into README.md between the markers
"""
import argparse

from agentrl import chapter
from agentrl.prose import PLURAL, WORD_ORDER, counts_phrase, ordered  # noqa: F401 (the tests read them here)
from agentrl.paths import README
from machinery.readme_blocks import replace_between_markers, write_text
from machinery.recorded import KIND_PLURAL, Recorded, exact_totals

BEGIN = '<!-- at a glance: begin (written by make report; do not edit by hand) -->'
END = '<!-- at a glance: end -->'
REAL_MODEL_NOTEBOOK = '14_real_model'
REAL_CLAIMS_KEY = 'real_claims'
REAL_GRPO_NOTEBOOK = '15_real_grpo'
REAL_GRPO_VERDICTS_KEY = 'verdicts'  # the seed verdicts of the claims judged on the real model's GRPO runs
CLIP_HIGHER_CLAIM_KEY = 'clip_higher_claim'  # agentrl.ch10.clip_higher.CLAIM_KEY (a test holds the two equal)
FRAGILE = 'fragile'  # agentrl.ch10.stability's label for a word that moves between arithmetic streams
MAX_LINES = 6

def seed_word(verdict, stability_row):
    """The word a claim is shown with: 'fragile' when notebook 09 found its word moving on another arithmetic
    stream, else its five-seed verdict (the README's claims table reads it the same way)."""
    return FRAGILE if stability_row and stability_row.get('label') == FRAGILE else verdict['verdict']


def claims_by_kind(verdicts, stability_rows):
    """'of the 8 mechanisms, 6 hold, 2 do not hold; of the 9 observations, ...' over seed-verdict dicts, kinds in
    the order the records first use them."""
    stable = {row['key']: row for row in stability_rows}
    parts = []
    for kind in dict.fromkeys(v['kind'] for v in verdicts):
        words = [seed_word(v, stable.get(v['key'])) for v in verdicts if v['kind'] == kind]
        parts.append(f'of the {len(words)} {KIND_PLURAL.get(kind, kind) if len(words) > 1 else kind}, '
                     f'{counts_phrase(words)}')
    return '; '.join(parts)


def glance_lines(recorded):
    """The first screen's lines (Markdown bullets) from the recorded results; a record not yet written leaves its
    line out."""
    lines = []
    total, match = exact_totals(recorded)
    if total:
        lines.append(f'- **Exact arithmetic**: **{match} of {total} lines** the chapter prints as exact (10.1–10.5, '
                     '10.6\'s covariance check and 3-step identity, 10.8\'s memory table) match ours character for '
                     'character.')
    seeds = recorded.get(chapter.SEED_NOTEBOOK, chapter.SEED_VERDICTS_KEY, [])
    stable = {row['key']: row for row in recorded.get(chapter.SEED_NOTEBOOK, chapter.STABILITY_KEY, [])}
    fragile = any(seed_word(v, stable.get(v['key'])) == FRAGILE
                  for v in seeds + recorded.get(chapter.SEED_NOTEBOOK, chapter.SCALE_VERDICTS_KEY, []))
    if seeds:
        legend = '; *fragile*: its word changes on another recorded arithmetic stream' if fragile else ''
        lines.append(f'- **The chapter\'s claims about TinyAgent, each judged on {len(seeds[0]["seeds"])} seeds** '
                     f'(notebook 09{legend}): {claims_by_kind(seeds, list(stable.values()))}.')
    clip = recorded.get(chapter.section('10.6').notebook, CLIP_HIGHER_CLAIM_KEY)
    if clip:
        lines.append(f'- **10.6\'s clip-higher reading**, judged on {len(clip["seeds"])} batch seeds (notebook 06): '
                     f'{clip["verdict"]}.')
    scaled = recorded.get(chapter.SEED_NOTEBOOK, chapter.SCALE_VERDICTS_KEY, [])
    if scaled:
        words = [seed_word(v, stable.get(v['key'])) for v in scaled]
        lines.append(f'- **Re-checked at twice the coefficient or the steps**, {len(scaled)} of them: '
                     f'{counts_phrase(words)}.')
    real = recorded.get(REAL_MODEL_NOTEBOOK, REAL_CLAIMS_KEY, [])
    if real:
        forced = [r for r in real if r.get('forced_by')]
        judged = [r for r in real if not r.get('forced_by')]
        lines.append(f'- **On a real language model** (SmolLM2-135M-Instruct, notebook 14), of the chapter\'s '
                     f'{len(real)} statements about distributions: {counts_phrase([r["verdict"] for r in judged])}'
                     + (f'; {len(forced)} more could not have failed on any model (an identity or a bound forces '
                        f'them) and {"is" if len(forced) == 1 else "are"} not counted' if forced else '') + '.')
    grpo = recorded.get(REAL_GRPO_NOTEBOOK, REAL_GRPO_VERDICTS_KEY, [])
    if grpo:
        tiny = {v['key']: v['verdict'] for v in seeds}
        shared = [v for v in grpo if v['key'] in tiny]
        agree = sum(tiny[v['key']] == v['verdict'] for v in shared)
        lines.append(f'- **GRPO on the real model** (SmolLM2-135M-Instruct, notebook 15), the chapter\'s claims about '
                     f'training, each judged on {len(grpo[0]["seeds"])} seeds by TinyAgent\'s rules: '
                     f'{claims_by_kind(grpo, [])}; {agree} of {len(shared)} get the verdict TinyAgent got.')
    if len(lines) > MAX_LINES:
        raise ValueError(f'the first screen has {len(lines)} lines, more than {MAX_LINES}')
    return lines


def with_glance(page_text, recorded):
    """page_text with the lines between BEGIN and END replaced by glance_lines; missing markers raise."""
    updated = replace_between_markers(page_text, BEGIN, END, glance_lines(recorded))
    if updated is None:
        raise ValueError(f'the page lacks the markers {BEGIN!r} ... {END!r}')
    return updated


def write_glance(page=README, recorded=None):
    """Write the first screen's lines into page (README.md) between the markers."""
    write_text(page, with_glance(page.read_text(encoding='utf-8'), recorded or Recorded()))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--write', action='store_true', help='write the lines into README.md between the markers')
    args = parser.parse_args(argv)
    recorded = Recorded()
    print('\n'.join(glance_lines(recorded)))
    if args.write:
        write_glance(README, recorded)


if __name__ == '__main__':
    main()
