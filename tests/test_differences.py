"""TINYAGENT.md and the sentences on the fit: their counts are the records', and the page regenerates identically."""
import re

import pytest

from agentrl.calibration import differences, fit
from agentrl.calibration.rows import ROWS, fitted_counts
from agentrl.paths import REPO, REPRODUCTION


@pytest.fixture(scope='module')
def records():
    return differences.load_records()


def test_the_page_regenerates_identically(records):
    assert (REPO / differences.PAGE).read_text(encoding='utf-8') == differences.page_text(records)


def test_the_records_hold_the_counts_the_sentences_give(records):
    default = differences.default_substrate(records)
    assert (default['trial'], default['rows_held'], default['confirmation_rows_held']) == (45, 24, 23)
    assert (records['arithmetic']['search'], records['arithmetic']['confirmation']) == (21, 22)
    assert records['rows'] == dict(total=len(ROWS), **fitted_counts(), book_vocab=316)
    assert sum(fitted_counts().values()) == len(ROWS) == 26 and fitted_counts()['output'] == 19
    turn_costs = {s['trial']: round(s['turn_cost'], 3) for s in records['substrates']}
    assert (turn_costs[45], turn_costs[8], turn_costs[26]) == (0.388, 0.492, 0.498)


def test_the_confirmation_sentence_gives_both_counts_and_says_they_were_selected(records):
    text = differences.confirmation_sentence(records)
    default, today = differences.default_substrate(records), records['arithmetic']
    assert (f"held {default['rows_held']} of {default['rows']} rows on seeds 0–4 and "
            f"{default['confirmation_rows_held']} on seeds 5–9") in text
    assert f"it holds {today['search']} and {today['confirmation']}" in text
    assert 'maximum of five counts selected on those seeds, not an untouched score' in text


def test_the_page_and_the_fit_sentences_give_the_records_numbers(records):
    text = differences.page_text(records)
    _, costly = fit.turn_cost_example(differences.default_substrate(records)['turn_cost'])
    assert f'| trial 45 | `calibration/` | short | 0.388 | 0.112 | {costly:+.3f} |' in text and '+0.035' in text
    rows = records['rows']
    assert (f"bands around {rows['total']} of the book's numbers ({rows['output']} printed in chapter 10's output "
            f"blocks, {rows['prose']} stated in its prose, {rows['derived']} derived") in text
    assert 'Only the regularised settings were held out.' in text and 'learning rate 0.001 for 8 full-batch' in text
    ranked = [name for name, _ in records['studies']['calibration']['importances']]
    assert f'rank {ranked.index("turn_cost") + 1} of the {len(ranked)} parameters' in text


def test_no_document_calls_the_confirmation_seeds_unseen_or_the_chapters_settings_the_test():
    """The untrue sentences this page corrected do not come back in what the report writes or in the code."""
    wrong = re.compile(r'unseen seeds|settings are the held-out test|each a number chapter 10 prints at chapter 9|'
                       r'Every run charges', re.I)
    texts = [REPRODUCTION, REPO / differences.PAGE, *(REPO / 'agentrl' / 'calibration').glob('*.py'),
             REPO / 'machinery' / 'readme_blocks.py', REPO / 'machinery' / 'report.py']
    assert [str(p) for p in texts if wrong.search(p.read_text(encoding='utf-8'))] == []
    facts = fit.fit_facts('t45')
    assert re.findall(r'\d+ of the book', fit.fit_note(facts)) == [f"{len(ROWS)} of the book"]
