"""Write REPRODUCTION.md: every output block of the chapter beside ours, exact lines marked, claims held or not.

Usage: python -m machinery.report [--output REPRODUCTION.md] [--results DIR]

Reads only data inside the repository: the book's printed lines (data/book/chapter10.json, via the registry) and
the results the notebooks recorded (results/<notebook>.json, via agentrl.results). It also rewrites MAINTAINING.md's
blocks that machinery/readme_blocks.py writes: the summary of how faithful the reproduction is, and the timings read
from the long-grammar search's and the substrate sweep's records.
"""
import argparse
import sys
from pathlib import Path

from agentrl import chapter
from agentrl.calibration import differences, substrates
from agentrl.calibration.fit import fit_facts, fit_note
from agentrl.ch10 import across as across_claims
from agentrl.ch10.claims import HOLDS, MECHANISM, OBSERVATION, TIED, outcome_of, seed_rule_text, verdict_line
from agentrl.ch10.clip_higher import CLAIM_KEY as CLIP_HIGHER_CLAIM_KEY
from agentrl.ch10.collapse_text import report_claims
from agentrl.ch10.explanations import explanation_lines
from agentrl.ch10 import glance
from agentrl.paths import MAINTAINING, README, REPO, REPRODUCTION
from machinery import front_door, make_clock, verdict_shift
from machinery.readme_blocks import (fragile_note, replace_between_markers, seed_counts, with_faithfulness,
                                     with_timings, write_text)
from machinery.recorded import Recorded, claim_counts, compare_block, seed_phrase, seed_verdicts_by_key

KIND_HEADINGS = {MECHANISM: 'Mechanisms (what the chapter demonstrates)',
                 OBSERVATION: 'Observations (the chapter\'s single-seed readings)'}


def seed_table(recorded):
    """Markdown lines setting the book's 10.7 table, our seed-0 run (notebook 07) and our seed summary (notebook 09)
    side by side, or [] if either of ours is missing."""
    columns, book_rows = chapter.book_table_10_7()
    ten_seven = chapter.blocks_of('10.7')[0]
    seed0 = [chapter.collapse(line).split(' | ') for line in recorded.get(ten_seven.notebook, ten_seven.key, [])]
    summary = recorded.get(chapter.SEED_NOTEBOOK, chapter.SEED_SUMMARY_KEY)
    if not seed0 or not summary:
        return []
    ours = {cells[0]: cells[1:] for cells in seed0[1:]}
    spread = {row['setting']: row['cells'] for row in summary['rows']}
    label = summary['label']
    out = ['### Table 1 across seeds\n',
           f'The book\'s row (one seed), ours on seed 0 (notebook 07) and ours over {label} (notebook 09: mean '
           '[min, max]; the entropy column there is the mean of steps 35-39 only).\n',
           '| ' + ' | '.join([columns[0], 'source'] + columns[1:]) + ' |', '|' + '---|' * (len(columns) + 1)]
    missing = ['missing'] * (len(columns) - 1)
    for row in book_rows:
        name = row[columns[0]]
        out.append('| ' + ' | '.join([name, 'book'] + [row[c] for c in columns[1:]]) + ' |')
        out.append('| ' + ' | '.join(['', 'ours, seed 0'] + ours.get(name, missing)) + ' |')
        out.append('| ' + ' | '.join(['', f'ours, {label}'] + spread.get(name, missing)) + ' |')
    return out + ['']


def claims_section(section, recorded):
    """(Markdown lines listing the chapter's claims on the section's runs, the summary-table text)."""
    notebook = section.notebook
    if section.number == '10.6':  # the clip-higher reading, judged on batch seeds by notebook 06
        return report_claims(recorded.get(notebook, CLIP_HIGHER_CLAIM_KEY), notebook)
    found = recorded.get(notebook, chapter.VERDICTS_KEY) if notebook in chapter.VERDICT_NOTEBOOKS else None
    if not found:
        return [], ''
    at_10_7 = section.number == '10.7'
    across = {k: v for k, v in seed_verdicts_by_key(recorded).items() if k in {f['key'] for f in found}}
    scaled = recorded.get(chapter.SEED_NOTEBOOK, chapter.SCALE_VERDICTS_KEY, []) if at_10_7 else []
    out = ['### The chapter\'s claims on our runs\n']
    stable_rows = recorded.get(chapter.SEED_NOTEBOOK, chapter.STABILITY_KEY, [])
    if across:
        seeds = next(iter(across.values()))['seeds']
        out.append(f'Each claim\'s verdict is judged on {len(seeds)} seeds ({", ".join(map(str, seeds))}; notebook 09, '
                   f'{seed_rule_text(len(seeds))}). Seed 0 (notebook {notebook[:2]}, the chapter\'s single seed) '
                   'follows it as one draw of those seeds, not as a verdict of its own.')
    for kind in dict.fromkeys(v['kind'] for v in found):
        out.append(f'\n**{KIND_HEADINGS.get(kind, kind)}:**\n')
        for v in (v for v in found if v['kind'] == kind):
            seeds = across.get(v['key'])
            said = {HOLDS: 'held', TIED: 'was tied (inside the one-draw tolerance)'}.get(outcome_of(v), 'did not hold')
            draw = f'seed 0 {said}: {v["evidence"]}'
            if seeds:
                out.append(f'- {v["text"]} — **{seed_phrase(seeds)}**{fragile_note(seeds, stable_rows)}; one draw, '
                           f'{draw}')
            else:
                out.append(f'- {chapter.collapse(verdict_line(v))}')
    counts = seed_counts(list(across.values())) if across else claim_counts(found)
    if scaled:
        out.append('\n**The mechanisms that fail at the chapter\'s settings, re-checked at twice the coefficient or '
                   'twice the steps (notebook 09):**\n')
        out.extend(f'- {v["text"]} — {seed_phrase(v)}{fragile_note(v, stable_rows)}' for v in scaled)
        holding = sum(v['verdict'] == HOLDS for v in scaled)
        counts += f'; at twice the scale {holding} of {len(scaled)} re-checks {"holds" if holding == 1 else "hold"}'
    readings = recorded.get(chapter.SEED_NOTEBOOK, chapter.EXPLANATIONS_KEY, []) if at_10_7 else []
    if readings:
        out.append('\n**Where a claim does not hold across the seeds: what each seed measured, and our reading '
                   '(notebook 09; a reading is shown only where the fact it rests on holds by the seed rule, '
                   'on more than half the seeds):**\n')
        out.extend(explanation_lines(readings))
    return out + [''], counts


def build_report(folder=None, snapshot=None):
    """The report's Markdown text, from the results in folder (default: results_dir()) and the verdict snapshot
    (default: the recorded one)."""
    recorded = Recorded(folder)
    body, summary = [], []
    for section in chapter.SECTIONS:
        title = f'{section.number} {section.title}'
        body.append(f'## {title}\n\nNotebook: `notebooks/{section.notebook}.ipynb`.\n')
        if not recorded.executed(section.notebook):
            body.append('*Not executed yet: no recorded results.*\n')
            summary.append(f'| {section.number} | {section.title} | not executed yet | |')
            continue
        n_exact = n_match = n_measured = 0
        for block in chapter.blocks_of(section.number):
            lines, exact, match, measured = compare_block(block, recorded)
            body.extend(lines)
            n_exact, n_match, n_measured = n_exact + exact, n_match + match, n_measured + measured
            if section.number == '10.7' and block.index == 0:
                body.extend(seed_table(recorded))
        parts = []
        if n_exact:
            parts.append(f'{n_match} of {n_exact} exact lines match'
                         + (' — all' if n_match == n_exact else ' — **not all**'))
        if n_measured:
            parts.append(f'{n_measured} TinyAgent rows compared (mechanisms, not digits)')
        claim_lines, counts = claims_section(section, recorded)
        body.extend(claim_lines)
        summary.append(f'| {section.number} | {section.title} | {"; ".join(parts)} | {counts} |')
    body.append('## Beyond the chapter\n\nNot in the book, so nothing to match: the tables the notebooks beyond the '
                'book record, as printed. Notebook 09\'s seed table and its per-seed claim checks are also set beside the book\'s '
                'table and our seed-0 run in 10.7 above.\n')
    for notebook, title, keys in chapter.BEYOND:
        body.append(f'### {title}\n\nNotebook: `notebooks/{notebook}.ipynb`.\n')
        if not keys:  # machinery shown to the reader (the engine appendix): it prints no table of its own
            body.append('It prints no table to set beside the book: it shows how the runs above are made.\n')
            continue
        blocks = ['\n'.join(line.rstrip() for line in recorded.get(notebook, key, [])) for key in keys]
        printed = '\n\n'.join(block for block in blocks if block)  # a blank line between two printed blocks
        body.append('```text\n' + printed + '\n```\n' if printed else '*Not executed yet.*\n')
        table = recorded.get(notebook, chapter.CLAIM_TABLE_KEY, []) if notebook == chapter.ACROSS_NOTEBOOK else []
        if table:
            facts = {f['name']: f for f in recorded.get(notebook, chapter.SUBSTRATE_FACTS_KEY, [])}
            headers = {n: substrates.heading(facts[n]) for n in substrates.in_order(table[0]['cells'])}
            body.append('Each claim on each substrate (seeds on which it is true, of 5, and the verdict by notebook '
                        '09\'s rule), and its label across the substrates:\n\n'
                        + across_claims.claim_table_markdown(table, headers) + '\n')
    snapshot = snapshot or verdict_shift.load_snapshot()
    if snapshot and verdict_shift.verdict_records(recorded):
        body.append('## Verdicts before and after the arithmetic changed\n\nThe outputs committed until 2026-12-05 '
                    'were computed on an AMD EPYC with Adam\'s square root from MKL\'s vector maths and judged by '
                    'the 4-of-5 seed rule. Now every optimiser takes an exactly rounded square root (a change of '
                    'rounding only) and the rule is the majority (`reports/verdict-rule.md`). Each verdict as '
                    f'recorded before (`{verdict_shift.SNAPSHOT.relative_to(REPO)}`, written by '
                    '`python -m machinery.verdict_shift`) and as the notebooks record it now; a move can come from '
                    'the rule, from the rounding, or both (the stability table of notebook 09 separates them):\n')
        body.append('\n'.join(verdict_shift.shift_lines(snapshot, recorded)) + '\n')
    head = ['# Reproduction report', '',
            'Written by `make` (`python -m machinery.report`) from the results the notebooks record '
            '(`results/`) and the book\'s printed lines (`data/book/chapter10.json`); do not edit by hand. Every '
            'output block the chapter prints is set beside ours, row by row, white space collapsed. Sections '
            '10.1–10.5, the covariance check and the 3-step identity of 10.6, and the model-size rows of the memory '
            'table in 10.8 are exact computations and must match the book to the character. The TinyAgent tables '
            'come from our own substrate (the book\'s chapters 1–9 are not available), so their digits are not '
            'expected to match: for them the report lists each claim the chapter makes and whether it holds on our '
            'runs (mechanisms: what the chapter demonstrates; observations: its single-seed readings).', '',
            *glance_lines(recorded), '',
            fit_note(fit_facts(), link='TINYAGENT.md') + ' '
            + differences.confirmation_sentence(differences.load_records()), '',
            '| section | title | lines | claims |', '|---|---|---|---|', *summary, '']
    return '\n'.join(head + body) + '\n'


def glance_lines(recorded):
    """The claims at a glance (agentrl.ch10.glance): the legend and the table, as Markdown lines."""
    return glance.markdown(glance.glance_rows(recorded.data))


def write_glance(page, recorded):
    """Write the claims-at-a-glance table into page (README.md) between its claims markers; missing markers
    raise."""
    updated = replace_between_markers(page.read_text(encoding='utf-8'), glance.CLAIMS_BEGIN, glance.CLAIMS_END,
                                      glance_lines(recorded))
    if updated is None:
        raise ValueError(f'{page.name} lacks the markers {glance.CLAIMS_BEGIN!r} ... {glance.CLAIMS_END!r} around the '
                         'claims table')
    write_text(page, updated)


REAL_MODEL_NOTEBOOK = '14_real_model'


def write_real_model_claims(page, recorded):
    """Write notebook 14's judged statements (agentrl.pretrained.claims) into page between its markers; a page
    without the markers raises, a notebook not yet executed leaves the page alone."""
    from agentrl.pretrained import claims as real_claims

    rows = recorded.get(REAL_MODEL_NOTEBOOK, 'real_claims')
    if rows is None:
        return
    updated = replace_between_markers(page.read_text(encoding='utf-8'), real_claims.BEGIN, real_claims.END,
                                      real_claims.markdown(rows))
    if updated is None:
        raise ValueError(f'{page.name} lacks the markers {real_claims.BEGIN!r} ... {real_claims.END!r}')
    write_text(page, updated)


def write_second_make(page=README, record=None):
    """Write the README's paragraph on a second `make` from the make clock's record (machinery/make_clock.py)."""
    lines = make_clock.second_make_lines(make_clock.load() if record is None else record)
    updated = replace_between_markers(page.read_text(encoding='utf-8'), make_clock.BEGIN, make_clock.END, lines)
    if updated is None:
        raise ValueError(f'{page.name} lacks the markers {make_clock.BEGIN!r} ... {make_clock.END!r}')
    write_text(page, updated)


def write_differences(repo=REPO):
    """Write TINYAGENT.md, how our TinyAgent differs from the book's, from the calibration records."""
    path = Path(repo) / differences.PAGE
    write_text(path, differences.page_text(differences.load_records(repo)))
    return path


def main(argv=None):
    """Command-line entry: write the report, and MAINTAINING.md's faithfulness block if it has its markers."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--output', type=Path, default=REPRODUCTION)
    parser.add_argument('--results', type=Path, default=None, help='results folder (default: results_dir())')
    parser.add_argument('--claims-page', type=Path, default=README,
                        help='the page holding the claims markers (default: README.md)')
    parser.add_argument('--readme', type=Path, default=MAINTAINING,
                        help='the page holding the faithfulness and timings markers (default: MAINTAINING.md)')
    args = parser.parse_args(argv)
    write_text(args.output, build_report(args.results))
    print(f'wrote {args.output}')
    print(f'wrote {write_differences()}')
    write_glance(args.claims_page, Recorded(args.results))
    write_real_model_claims(args.claims_page, Recorded(args.results))
    front_door.write_glance(args.claims_page, Recorded(args.results))
    write_second_make(args.claims_page)
    print(f'wrote the first screen and the claims tables into {args.claims_page}')
    if args.readme.is_file():
        updated = with_faithfulness(args.readme.read_text(encoding='utf-8'), Recorded(args.results))
        if updated is None:
            print(f'{args.readme}: no faithfulness markers, left unchanged', file=sys.stderr)
        else:
            timed = with_timings(updated)
            if timed is None:
                print(f'{args.readme}: no timings markers, left without its timings block', file=sys.stderr)
            write_text(args.readme, timed or updated)
            print(f'updated the faithfulness summary{"" if timed is None else " and the timings"} in {args.readme}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
