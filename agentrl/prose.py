"""What the notebooks share to write their sentences and show their wide printed blocks."""
import html

from agentrl import results


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
