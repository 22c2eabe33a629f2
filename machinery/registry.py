"""The notebooks as make targets, in the chapter's order (agentrl.chapter holds the map itself).

Usage: python -m machinery.registry (--chapter | --beyond | --all) [--stems]
prints the make targets (nb-<notebook>) of the notebooks that reproduce the chapter (sections 10.1-10.8), of those
that go beyond it (notebooks 09 to 11), or of all of them; --stems prints the notebook file stems instead.
"""
import argparse
import sys

from agentrl.chapter import beyond_notebooks, chapter_notebooks


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
