"""What the notebooks share to write their sentences and show their wide printed blocks."""
import html
from collections import Counter

from agentrl import results


# The order words are listed in when present: the agreeing ones first. A word not listed here comes after these, in
# the order the records first use it.
WORD_ORDER = ('holds', 'carries over', 'tied', 'seed-dependent', 'fragile', 'does not hold', 'does not carry over')
# A count above one takes the plural verb; other words read the same either way ("2 tied", "2 fragile").
PLURAL = {'holds': 'hold', 'does not hold': 'do not hold', 'carries over': 'carry over',
          'does not carry over': 'do not carry over'}


def ordered(counts):
    """(word, count) pairs of a Counter, in WORD_ORDER, then unknown words in the order they were first counted."""
    known = [w for w in WORD_ORDER if counts.get(w)]
    return [(w, counts[w]) for w in known + [w for w in counts if w not in WORD_ORDER and counts[w]]]


def counts_phrase(words):
    """'6 hold, 1 tied, 2 do not hold' for a list of verdict words, each distinct word with its count."""
    return ', '.join(f'{n} {PLURAL.get(word, word) if n > 1 else word}' for word, n in ordered(Counter(words)))


def and_join(items):
    """'a', 'a and b', 'a, b and c'."""
    items = list(items)
    return items[0] if len(items) == 1 else f'{", ".join(items[:-1])} and {items[-1]}'


def show_wide(notebook, key, lines):
    """Record lines under key as results.show does, and display them as a table (a row per line, cells split at
    ' | ', the plain lines as the text fallback): for blocks in the book's layout wider than 110 columns."""
    results.record(notebook, key, lines)
    display_wide(lines)


def display_wide(lines):
    """Display lines as show_wide does, recording nothing: for the book's own lines beside ours."""
    from IPython.display import display  # a notebook's kernel has IPython; the package loads without it

    rows = [line.split(' | ') for line in lines]
    width = max(len(row) for row in rows)

    def cell(text, span=1):
        return f'<td colspan="{span}" style="text-align:left">{html.escape(text.strip())}</td>'

    body = ''.join('<tr>' + ''.join(map(cell, row[:-1])) + cell(row[-1], width - len(row) + 1) + '</tr>'
                   for row in rows)
    display({'text/plain': '\n'.join(lines), 'text/html': f'<table>{body}</table>'}, raw=True)
