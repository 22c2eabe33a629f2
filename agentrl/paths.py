"""Every path the project reads or writes, in one place; all of them inside the repository unless redirected.

Environment variables redirect the writable ones (tests use them to keep the repository clean):
AGENTRL_CACHE_DIR (RL bases and runs), AGENTRL_RUNS_DIR (runs only), AGENTRL_FIGURES_DIR (SVG figures),
AGENTRL_RESULTS_DIR (the notebooks' structured results), AGENTRL_SIDE_RUNS_DIR (the side runs' folders).

A side run (a notebook executed with other parameters than its committed ones, see agentrl.side_runs) never
writes the committed results/ or figures/: while one is set with use_side_folder, results_dir() and figures_dir()
return its folder's results/ and figures/ wherever they would have returned the committed ones.
"""
import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]  # the repository root (agentrl/ is installed editable from it)
PACKAGE = REPO / 'agentrl'
NOTEBOOKS = REPO / 'notebooks'
BOOK_DATA = REPO / 'data' / 'book'  # what the chapter prints, stored as data (no outside file is ever read)
BOOK_OUTPUTS = BOOK_DATA / 'chapter10.json'  # the book's printed output blocks of sections 10.1-10.8
RESULTS = REPO / 'results'  # structured results written by the executed notebooks (JSON, committed)
FIGURES = REPO / 'figures'  # the SVG figures written by the executed notebooks (committed)
SIDE_RUNS = REPO / 'side-runs'  # the side runs' results and figures (git-ignored)
SUBSTRATE_SWEEP = RESULTS / 'substrate_sweep.json'  # the sweep's committed record: notebook 11's input, never
#                                                   redirected (a test's or a side run's notebook 11 reads it too)
REAL_SWEEP = RESULTS / 'real_sweep.json'  # the real-model sweep's record (machinery/real_sweep.py): notebook 15's input
FRAMEWORK_SWEEP = RESULTS / 'framework_sweep.json'  # the framework options' runs: notebook 12's input, likewise
CALIBRATION = REPO / 'calibration'  # the calibration search's committed record (study.db, trials.json, README.md)
REPRODUCTION = REPO / 'REPRODUCTION.md'
README = REPO / 'README.md'  # for readers: what the chapter argues, the ways in, the notebook map
MAINTAINING = REPO / 'MAINTAINING.md'  # for maintainers; it holds the blocks code writes between markers


def cache_dir():
    """Where built RL bases live: $AGENTRL_CACHE_DIR, else <repo>/.cache/agentrl."""
    return Path(os.environ.get('AGENTRL_CACHE_DIR') or REPO / '.cache' / 'agentrl')


def runs_dir():
    """Where finished training runs live: $AGENTRL_RUNS_DIR, else cache_dir()/runs."""
    return Path(os.environ.get('AGENTRL_RUNS_DIR') or cache_dir() / 'runs')


def side_runs_dir():
    """Where side runs keep their results and figures: $AGENTRL_SIDE_RUNS_DIR, else <repo>/side-runs."""
    return Path(os.environ.get('AGENTRL_SIDE_RUNS_DIR') or SIDE_RUNS)


_side_folder = None  # the folder of this process's side run (None: not a side run); set by use_side_folder


def use_side_folder(folder):
    """From now on in this process, results and figures meant for the committed folders go under folder (None: stop)."""
    global _side_folder
    _side_folder = None if folder is None else Path(folder)


def side_folder():
    """The folder of this process's side run, or None."""
    return _side_folder


def _unless_committed(chosen, committed, kind):
    """chosen, or the side run's folder for kind if a side run is set and chosen is the committed folder."""
    if _side_folder is not None and chosen.resolve() == committed.resolve():
        return _side_folder / kind
    return chosen


def figures_dir():
    """Where figures are written: $AGENTRL_FIGURES_DIR, else <repo>/figures (a side run's own folder instead)."""
    return _unless_committed(Path(os.environ.get('AGENTRL_FIGURES_DIR') or FIGURES), FIGURES, 'figures')


def results_dir():
    """Where notebooks write their structured results: $AGENTRL_RESULTS_DIR, else <repo>/results (a side run's own
    folder instead)."""
    return _unless_committed(Path(os.environ.get('AGENTRL_RESULTS_DIR') or RESULTS), RESULTS, 'results')
