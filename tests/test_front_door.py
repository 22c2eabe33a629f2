"""The README's first screen (machinery/front_door.py): its counts are the committed records' and nothing else, every
verdict word the records use is counted under its own name, and the README shows the lines as computed."""
import json
from collections import Counter

import pytest

from agentrl import chapter
from agentrl.paths import README, RESULTS
from machinery import front_door
from machinery.readme_blocks import between_markers
from machinery.recorded import Recorded, exact_totals


def verdict(key, kind, word, seeds=5):
    return dict(key=key, kind=kind, verdict=word, seeds=list(range(seeds)), text=key, held_on=0)


def records(folder, seeds=(), scaled=(), stability=(), real=(), clip=None, grpo=()):
    """Write a results folder holding notebook 09's (and 14's, 06's, 15's) records as given; -> Recorded of it."""
    folder.mkdir(exist_ok=True)
    (folder / f'{chapter.SEED_NOTEBOOK}.json').write_text(json.dumps({
        chapter.SEED_VERDICTS_KEY: list(seeds), chapter.SCALE_VERDICTS_KEY: list(scaled),
        chapter.STABILITY_KEY: list(stability)}))
    (folder / f'{front_door.REAL_MODEL_NOTEBOOK}.json').write_text(json.dumps({front_door.REAL_CLAIMS_KEY: list(real)}))
    if grpo:
        (folder / f'{front_door.REAL_GRPO_NOTEBOOK}.json').write_text(
            json.dumps({front_door.REAL_GRPO_VERDICTS_KEY: list(grpo)}))
    if clip:
        (folder / '06_entropy_collapse.json').write_text(json.dumps({front_door.CLIP_HIGHER_CLAIM_KEY: clip}))
    return Recorded(folder)


def test_the_readme_shows_the_lines_the_committed_records_give():
    shown = between_markers(README.read_text(encoding='utf-8'), front_door.BEGIN, front_door.END)
    assert shown == front_door.glance_lines(Recorded(RESULTS)), \
        'the README\'s first screen is stale: python -m machinery.front_door --write'


def test_the_committed_counts_add_up_to_the_records():
    recorded = Recorded(RESULTS)
    lines = front_door.glance_lines(recorded)
    assert 1 <= len(lines) <= front_door.MAX_LINES
    total, match = exact_totals(recorded)
    assert f'**{match} of {total} lines**' in lines[0]
    seeds = recorded.get(chapter.SEED_NOTEBOOK, chapter.SEED_VERDICTS_KEY)
    claims_line = next(line for line in lines if 'claims about TinyAgent' in line)
    for kind, n in Counter(v['kind'] for v in seeds).items():
        assert f'of the {n} ' in claims_line, kind
    real = recorded.get(front_door.REAL_MODEL_NOTEBOOK, front_door.REAL_CLAIMS_KEY)
    real_line = next(line for line in lines if 'statements about distributions' in line)
    assert f'of the chapter\'s {len(real)} statements' in real_line
    for word, n in Counter(r['verdict'] for r in real if not r.get('forced_by')).items():
        assert f'{n} {front_door.PLURAL.get(word, word) if n > 1 else word}' in real_line, word


def test_each_distinct_word_is_counted_under_its_own_name(tmp_path):
    # a fourth word (tied) and one nobody has used yet (undecided) each get their own count, after the known ones
    seeds = [verdict('a', 'mechanism', 'holds'), verdict('b', 'mechanism', 'tied'),
             verdict('c', 'mechanism', 'does not hold'), verdict('d', 'mechanism', 'undecided'),
             verdict('e', 'mechanism', 'holds')]
    line = front_door.glance_lines(records(tmp_path / 'r', seeds))[1]
    assert 'of the 5 mechanisms, 2 hold, 1 tied, 1 does not hold, 1 undecided.' in line
    assert 'fragile' not in line  # no fragile claim, so no legend for it


def test_a_claim_taken_out_of_a_kind_leaves_its_count(tmp_path):
    # a sanity check recorded under its own kind is counted apart, not among the mechanisms
    seeds = [verdict('a', 'mechanism', 'holds'), verdict('b', 'mechanism', 'holds'),
             verdict('pass8-ge-pass1', 'sanity check', 'holds'), verdict('c', 'observation', 'does not hold')]
    line = front_door.glance_lines(records(tmp_path / 'r', seeds))[1]
    assert 'of the 2 mechanisms, 2 hold; of the 1 sanity check, 1 holds; of the 1 observation, 1 does not hold' \
        in line


def test_a_fragile_claim_is_shown_fragile_whatever_its_word_here(tmp_path):
    seeds = [verdict('a', 'observation', 'holds'), verdict('b', 'observation', 'holds')]
    stability = [dict(key='a', label='fragile'), dict(key='b', label='stable')]
    line = front_door.glance_lines(records(tmp_path / 'r', seeds, stability=stability))[1]
    assert 'of the 2 observations, 1 holds, 1 fragile' in line and '*fragile*: its word changes' in line


def test_the_real_model_and_the_rechecks_and_10_6_are_counted(tmp_path):
    real = [dict(verdict='carries over'), dict(verdict='carries over'), dict(verdict='does not carry over'),
            dict(verdict='carries over', forced_by='an identity')]  # shown apart, never counted as carrying over
    scaled = [verdict('x', 'at 2x', 'does not hold'), verdict('y', 'at 2x', 'does not hold')]
    clip = dict(verdict='does not hold', seeds=list(range(10)))
    lines = front_door.glance_lines(records(tmp_path / 'r', [verdict('a', 'mechanism', 'holds')], scaled=scaled,
                                            real=real, clip=clip))
    assert lines[-1].endswith('of the chapter\'s 4 statements about distributions: 2 carry over, 1 does not carry '
                              'over; 1 more could not have failed on any model (an identity or a bound forces them) '
                              'and is not counted.')
    assert any('3 of them' not in line and '2 of them: 2 do not hold.' in line for line in lines)
    assert any('on 10 batch seeds (notebook 06): does not hold.' in line for line in lines)


def test_the_real_models_grpo_verdicts_are_counted_and_set_beside_tinyagents(tmp_path):
    tiny = [verdict('a', 'mechanism', 'holds'), verdict('b', 'mechanism', 'tied'), verdict('c', 'observation', 'tied')]
    grpo = [verdict('a', 'mechanism', 'holds', seeds=3), verdict('b', 'mechanism', 'holds', seeds=3),
            verdict('c', 'observation', 'does not hold', seeds=3), verdict('new', 'observation', 'tied', seeds=3)]
    line = front_door.glance_lines(records(tmp_path / 'r', tiny, grpo=grpo))[-1]
    assert line.startswith('- **GRPO on the real model**') and 'each judged on 3 seeds' in line
    assert line.endswith('of the 2 mechanisms, 2 hold; of the 2 observations, 1 tied, 1 does not hold; '
                         '1 of 3 get the verdict TinyAgent got.')  # 'new' has no TinyAgent verdict to agree with
    assert not any('GRPO' in line for line in front_door.glance_lines(records(tmp_path / 'none', tiny)))


def test_a_record_not_yet_written_leaves_its_line_out(tmp_path):
    folder = tmp_path / 'empty'
    folder.mkdir()
    lines = front_door.glance_lines(Recorded(folder))
    assert len(lines) == 1 and lines[0].startswith('- **Exact arithmetic**: **0 of ')


def test_the_clip_higher_key_is_notebook_06s():
    from agentrl.ch10 import clip_higher
    assert front_door.CLIP_HIGHER_CLAIM_KEY == clip_higher.CLAIM_KEY


def test_writing_replaces_only_the_block_and_needs_its_markers(tmp_path):
    page = tmp_path / 'README.md'
    page.write_text(f'# title\n\n{front_door.BEGIN}\nstale line\n{front_door.END}\n\nafter\n', encoding='utf-8')
    recorded = records(tmp_path / 'r', [verdict('a', 'mechanism', 'holds')])
    front_door.write_glance(page, recorded)
    text = page.read_text(encoding='utf-8')
    assert text.startswith('# title\n\n') and text.endswith('\n\nafter\n') and 'stale line' not in text
    assert between_markers(text, front_door.BEGIN, front_door.END) == front_door.glance_lines(recorded)
    page.write_text('# no markers\n', encoding='utf-8')
    with pytest.raises(ValueError, match='markers'):
        front_door.write_glance(page, recorded)


NUMBER_WORDS = ('no', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten')


def test_the_notebook_map_says_which_exercises_notebook_10_answers():
    # the row names as many exercises, and the same ones, as notebook 10 records answers for
    stem, _, keys = next(entry for entry in chapter.BEYOND if entry[0] == '10_exercises')
    recorded = Recorded(RESULTS)
    answered = sorted(int(key.split('_')[1]) for key in keys
                      if key.startswith('exercise_') and recorded.get(stem, key))
    row = next(line for line in README.read_text(encoding='utf-8').splitlines() if f'[{stem}]' in line)
    question = row.split('|')[3]
    assert f'{NUMBER_WORDS[len(answered)].capitalize()} of the chapter\'s' in question, question
    assert answered == list(range(answered[0], answered[-1] + 1)) and f'({answered[0]}–{answered[-1]};' in question
