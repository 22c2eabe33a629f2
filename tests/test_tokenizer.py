"""The word-level tokenizer: vocabulary, round trip, unknown words."""
import pytest
import torch

import agentrl as arl
from substrate_fixtures import on_main, tokenizer  # noqa: F401 (on_main: autouse)


def test_vocabulary_size_and_padding():
    tok = tokenizer()
    assert 250 <= len(tok) <= 400
    assert tok.words[tok.pad_id] == '<pad>'
    assert len(set(tok.words)) == len(tok)


def test_round_trip_of_a_whole_episode():
    tok = tokenizer()
    task = arl.make_tasks('train')[0]
    env = arl.make_env()
    words = env.reset(task, offset=2)
    for call in ['read L3 L8', f'edit L{2 + task.bug_line} {task.wrong} {task.right}', 'submit']:
        words += call.split() + [';']
        observation, _ = env.step(call)
        words += observation
    text = ' '.join(words)
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert tok.decode(torch.tensor(ids)) == text
    assert tok.encode(words) == ids


def test_unknown_word_is_a_clear_error():
    tok = tokenizer()
    with pytest.raises(ValueError, match="unknown word 'banana'"):
        tok.encode('read L1 banana')
    with pytest.raises(ValueError, match='ids must lie in'):
        tok.decode([0, len(tok)])


def test_every_observation_word_is_in_the_vocabulary():
    tok = tokenizer()
    env = arl.make_env()
    for task in arl.make_tasks('all'):
        env.reset(task, task.max_offset)
        for call in ['read L1 L12', 'read L12 L1', 'frobnicate', 'edit L12 < >', 'edit L1 def return', 'edit L1 a b',
                     'submit now']:
            observation, done = env.step(call)
            tok.encode(observation)
            if done:
                break
