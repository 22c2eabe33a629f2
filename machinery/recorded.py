"""The results the notebooks recorded, each file read once, and what REPRODUCTION.md and the README's faithfulness
summary both write from them: a book block beside ours, the exact lines that match, the claims held, a claim's verdict
across seeds."""
from agentrl import chapter, results
from agentrl.ch10.claims import AT_SCALE, MECHANISM, OBSERVATION, tally

KIND_PLURAL = {MECHANISM: 'mechanisms', OBSERVATION: 'observations', AT_SCALE: 're-checks at twice the scale'}


class Recorded:
    """The recorded results of every registered notebook, each file read once ({} for a notebook not executed)."""

    def __init__(self, folder=None):
        stems = chapter.chapter_notebooks() + chapter.beyond_notebooks()
        self.data = {stem: results.load(stem, folder, default=None) for stem in stems}

    def executed(self, notebook):
        """Whether the notebook has a results file."""
        return self.data.get(notebook) is not None

    def get(self, notebook, key, default=None):
        """One recorded value, or default if the notebook or the key is missing."""
        return (self.data.get(notebook) or {}).get(key, default)


def cell(text):
    """Text as a Markdown table cell in code style (pipes escaped)."""
    return '`' + text.replace('|', '\\|') + '`' if text else ''


def compare_block(block, recorded):
    """(Markdown lines of one book block beside ours, exact lines, exact lines that match, measured rows)."""
    ours = [chapter.collapse(line) for line in recorded.get(block.notebook, block.key, [])]
    out = [f'### Table {block.index + 1}\n', '| row | book | ours | |', '|---|---|---|---|']
    n_exact = n_match = n_measured = 0
    for row in range(max(len(block.lines), len(ours))):
        theirs = block.lines[row] if row < len(block.lines) else ''
        mine = ours[row] if row < len(ours) else ''
        if row < len(block.exact) and block.exact[row]:
            n_exact += 1
            n_match += mine == theirs
            mark = 'exact match' if mine == theirs else '**differs**'
        else:
            n_measured += 1
            mark = 'TinyAgent (ours measured)'
        out.append(f'| {row + 1} | {cell(theirs)} | {cell(mine)} | {mark} |')
    return out + [''], n_exact, n_match, n_measured


def exact_totals(recorded):
    """(exact lines, exact lines that match) over every book block, read from the recorded results."""
    total = match = 0
    for block in chapter.book_blocks():
        _, n_exact, n_match, _ = compare_block(block, recorded)
        total, match = total + n_exact, match + n_match
    return total, match


def claim_counts(found):
    """'mechanisms 4 of 7 held, observations 4 of 8 held' from verdict dicts."""
    return ', '.join(f'{KIND_PLURAL.get(kind, kind)} {held} of {total} held'
                     for kind, (held, total) in tally(found).items())


def seed_verdicts_by_key(recorded):
    """{claim key: seed-verdict dict} of notebook 09's checks of the chapter's claims on every seed."""
    return {v['key']: v for v in recorded.get(chapter.SEED_NOTEBOOK, chapter.SEED_VERDICTS_KEY, [])}


def seed_phrase(summary):
    """'held on 2/3 seeds (seed-dependent)' for a seed-verdict dict, its tied seeds named apart."""
    tied = summary.get('tied_on', 0)
    return (f'held on {summary["held_on"]}/{len(summary["seeds"])} seeds' + (f', tied on {tied}' if tied else '')
            + f' ({summary["verdict"]})')
