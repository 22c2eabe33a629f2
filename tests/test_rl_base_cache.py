"""The RL base's disk cache: keyed by everything that determines it, atomic, rebuilt on corruption or mismatch."""
import warnings

import pytest
import torch

import agentrl as arl
from agentrl.substrate import sft
from agentrl.verified_cache import save_verified
from substrate_fixtures import max_param_difference, tokenizer

TINY = arl.SFTConfig(careful_steps=3, habit_steps=2, batch_size=4)


def cache_files(directory):
    return sorted(p.name for p in directory.iterdir())


def no_build(*args, **kwargs):
    raise AssertionError('the RL base was rebuilt although a valid cache file exists')


def test_second_call_loads_the_same_weights_without_building(tmp_path, monkeypatch):
    first = arl.make_rl_base(tokenizer(), sft_cfg=TINY, directory=tmp_path)
    files = cache_files(tmp_path)
    assert len(files) == 1 and files[0].startswith('rl_base-') and files[0].endswith('.pt')  # no temporary left
    monkeypatch.setattr(sft, 'build_rl_base', no_build)
    second = arl.make_rl_base(tokenizer(), sft_cfg=TINY, directory=tmp_path)
    assert max_param_difference(first, second) == 0.0


def test_building_is_deterministic(tmp_path):
    a = arl.make_rl_base(tokenizer(), sft_cfg=TINY, directory=tmp_path / 'a')
    b = arl.make_rl_base(tokenizer(), sft_cfg=TINY, directory=tmp_path / 'b')
    assert max_param_difference(a, b) == 0.0


def test_environment_variable_chooses_the_directory(tmp_path, monkeypatch):
    monkeypatch.setenv('AGENTRL_CACHE_DIR', str(tmp_path))
    assert sft.cache_dir() == tmp_path
    arl.make_rl_base(tokenizer(), sft_cfg=TINY)
    assert len(cache_files(tmp_path)) == 1


def test_key_changes_with_tasks_vocabulary_model_and_sft_settings():
    tok, tasks = tokenizer(), arl.make_tasks('train')
    model_cfg = arl.ModelConfig(vocab_size=len(tok))
    key = sft.cache_key(tok, tasks, model_cfg, TINY)
    assert key == sft.cache_key(tok, list(tasks), model_cfg, TINY)
    others = [sft.cache_key(tok, tasks[1:], model_cfg, TINY),
              sft.cache_key(arl.Tokenizer(tok.words + ['extra']), tasks, model_cfg, TINY),
              sft.cache_key(tok, tasks, arl.ModelConfig(vocab_size=len(tok), n_layer=3), TINY),
              sft.cache_key(tok, tasks, model_cfg, arl.SFTConfig(careful_steps=4, habit_steps=2, batch_size=4)),
              sft.cache_key(tok, tasks, model_cfg, arl.SFTConfig(careful_steps=3, habit_steps=2, batch_size=4,
                                                                 habits=arl.Habits(read=0.5)))]
    assert len({key, *others}) == 6


def test_corrupt_file_is_rebuilt_with_a_warning(tmp_path, monkeypatch):
    good = arl.make_rl_base(tokenizer(), sft_cfg=TINY, directory=tmp_path)
    path = tmp_path / cache_files(tmp_path)[0]
    path.write_bytes(b'not a torch file')
    with pytest.warns(UserWarning, match='unusable'):
        rebuilt = arl.make_rl_base(tokenizer(), sft_cfg=TINY, directory=tmp_path)
    assert max_param_difference(good, rebuilt) == 0.0
    monkeypatch.setattr(sft, 'build_rl_base', no_build)
    with warnings.catch_warnings():
        warnings.simplefilter('error')  # the rewritten file is valid again
        arl.make_rl_base(tokenizer(), sft_cfg=TINY, directory=tmp_path)


def test_mismatched_file_is_rebuilt_with_a_warning(tmp_path):
    good = arl.make_rl_base(tokenizer(), sft_cfg=TINY, directory=tmp_path)
    path = tmp_path / cache_files(tmp_path)[0]
    stored = torch.load(path, weights_only=True)
    other = {**stored['description'], 'sft': {**stored['description']['sft'], 'seed': 1}}
    zeros = {k: torch.zeros_like(v) for k, v in stored['payload'].items()}
    save_verified(path, zeros, other)  # a valid file made for other settings, under this name
    with pytest.warns(UserWarning, match="does not match at 'sft.seed'"):
        rebuilt = arl.make_rl_base(tokenizer(), sft_cfg=TINY, directory=tmp_path)
    assert max_param_difference(good, rebuilt) == 0.0
    assert torch.load(path, weights_only=True)['description'] == stored['description']
