"""Every path the project reads or writes, in one place; all of them inside the repository unless redirected.

Environment variables redirect the writable ones (tests use them to keep the repository clean):
AGENTRL_CACHE_DIR (RL bases and runs), AGENTRL_RUNS_DIR (runs only), AGENTRL_FIGURES_DIR (SVG figures),
AGENTRL_RESULTS_DIR (the notebooks' structured results).
"""
import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]  # the repository root (agentrl/ is installed editable from it)
PACKAGE = REPO / 'agentrl'
NOTEBOOKS = REPO / 'notebooks'
BOOK_DATA = REPO / 'data' / 'book'  # what the chapter prints, stored as data (no outside file is ever read)
BOOK_OUTPUTS = BOOK_DATA / 'chapter10.json'  # the book's printed output blocks of sections 10.1-10.8
RESULTS = REPO / 'results'  # structured results written by the executed notebooks (JSON, committed)
REPRODUCTION = REPO / 'REPRODUCTION.md'
README = REPO / 'README.md'


def cache_dir():
    """Where built RL bases live: $AGENTRL_CACHE_DIR, else <repo>/.cache/agentrl."""
    return Path(os.environ.get('AGENTRL_CACHE_DIR') or REPO / '.cache' / 'agentrl')


def runs_dir():
    """Where finished training runs live: $AGENTRL_RUNS_DIR, else cache_dir()/runs."""
    return Path(os.environ.get('AGENTRL_RUNS_DIR') or cache_dir() / 'runs')


def figures_dir():
    """Where figures are written: $AGENTRL_FIGURES_DIR, else <repo>/figures."""
    return Path(os.environ.get('AGENTRL_FIGURES_DIR') or REPO / 'figures')


def results_dir():
    """Where notebooks write their structured results: $AGENTRL_RESULTS_DIR, else <repo>/results."""
    return Path(os.environ.get('AGENTRL_RESULTS_DIR') or RESULTS)
