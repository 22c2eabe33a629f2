"""Choose the seed rule by measurement: how many verdicts each candidate rule moves between two arithmetic streams.

Usage: python -m machinery.verdict_rule [--write]
prints (or writes to reports/verdict-rule.md) the candidate rules of agentrl.ch10.stability, each with the claims
whose word differs between the two streams recorded first in data/streams/, and the rule with the fewest moves.
"""
import argparse
import sys

from agentrl.atomic import atomic_output
from agentrl.ch10 import stability
from agentrl.paths import REPO

RECORD = REPO / 'reports' / 'verdict-rule.md'


def choose(comparison):
    """The candidate with the fewest moved claims; on a tie, the earlier one in CANDIDATE_RULES."""
    return min(comparison, key=lambda entry: len(entry[2]))[0]


def record_lines(first, second):
    comparison = stability.rule_comparison(first, second)
    claims = len([k for k in first['held'] if k in second['held']])
    lines = ['# The seed rule, chosen by measurement', '',
             f'Two arithmetic streams of the same code on seeds {", ".join(map(str, first["seeds"]))}:', '',
             f'- **{first["label"]}**: {first["arithmetic"]}',
             f'- **{second["label"]}**: {second["arithmetic"]}', '',
             f'Each candidate rule judged the {claims} claims of notebook 09 (the chapter\'s claims and the re-checks at '
             'twice the scale) on each stream; a claim *moves* when its word differs between the streams.', '',
             '| rule | what it says | claims that move | which |', '|---|---|---|---|']
    for name, text, keys in comparison:
        lines.append(f'| {name} | {text} | {len(keys)} of {claims} | {", ".join(keys) or "none"} |')
    lines += ['', f'Chosen: **{choose(comparison)}** (the fewest moves; a tie would keep the earlier rule). A claim '
              'whose word still moves between streams is labelled *fragile* wherever it is reported.', '',
              'This record and the rule were committed before the runs that judge them: the regeneration on the new '
              'CPU pin, whose Adam takes an exactly rounded square root, a third stream that differs from the first '
              'only in rounding.']
    return lines


JUDGED = REPO / 'reports' / 'verdict-stability.md'


def committed_stream():
    """The committed results of notebook 09 as a stream (its per-seed outcomes)."""
    from agentrl import chapter, results
    from agentrl.paths import RESULTS
    nine = results.load(chapter.SEED_NOTEBOOK, RESULTS)
    return stability.stream_from_verdicts(nine[chapter.SEED_VERDICTS_KEY] + nine[chapter.SCALE_VERDICTS_KEY],
                                          'now', 'the outputs as committed now', '', '')


def judged_lines(current, streams):
    """After the runs: each candidate rule's moves between the current results and each recorded stream."""
    claims_n = len(current['held'])
    lines = ['# The seed rule, judged by the runs after it', '',
             f'The current results (`results/09_seeds.json`, {current["label"]}) beside each recorded stream. The '
             'rule was chosen and committed before these runs (`reports/verdict-rule.md`); this record only counts.', '',
             '| rule | ' + ' | '.join(f'moves against *{s["short"]}*' for s in streams) + ' |',
             '|---|' + '---|' * len(streams)]
    for name, (_, rule) in stability.CANDIDATE_RULES.items():
        cells = []
        for other in streams:
            keys = stability.moved(rule, current, other)
            cells.append(f'{len(keys)} of {claims_n}' + (f' ({", ".join(keys)})' if keys else ''))
        lines.append(f'| {name} | ' + ' | '.join(cells) + ' |')
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--write', action='store_true', help=f'write {RECORD.relative_to(REPO)}')
    parser.add_argument('--judge', action='store_true', help='instead, count each rule\'s moves between the current '
                        f'results and every recorded stream (written to {JUDGED.relative_to(REPO)} with --write)')
    args = parser.parse_args(argv)
    if args.judge:
        text = '\n'.join(judged_lines(committed_stream(), stability.recorded_streams())) + '\n'
        if args.write:
            with atomic_output(JUDGED, '.md') as tmp:
                tmp.write_text(text, encoding='utf-8')
        print(text, end='')
        return 0
    streams = stability.recorded_streams()
    if len(streams) < 2:
        sys.exit(f'need two recorded streams in {stability.STREAMS}, found {len(streams)}')
    text = '\n'.join(record_lines(*streams[:2])) + '\n'
    if args.write:
        with atomic_output(RECORD, '.md') as tmp:
            tmp.write_text(text, encoding='utf-8')
    print(text, end='')
    return 0


if __name__ == '__main__':
    sys.exit(main())
