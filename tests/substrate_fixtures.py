"""Shared helpers for the substrate tests (imported explicitly; tests/conftest.py belongs to the notebooks)."""
import atexit
import functools
import shutil
import tempfile
from pathlib import Path

import pytest
import torch

import agentrl as arl
from agentrl.substrate.config import CANDIDATES, active, use

MAIN = CANDIDATES['main']  # the substrate before the calibration, which the numbers of these unit tests were written for


@pytest.fixture(autouse=True, scope='module')
def on_main():
    """Imported into a test module: its tests build the named configuration 'main' (tasks, tokenizer, RL base,
    RLConfig defaults), whatever config.DEFAULT is. The mechanisms they test do not depend on it; their numbers do."""
    with use(MAIN):
        yield MAIN


# A quick SFT: enough for a model that behaves like an agent, fast enough for tests (a few seconds).
QUICK_SFT = arl.SFTConfig(careful_steps=80, habit_steps=20, batch_size=16)
# A few SFT steps only, for tests of plumbing (records, caches, executors) that never read how the agent behaves:
# building the RL base is then a second, where QUICK_SFT's takes most of a minute of CPU.
PLUMBING_SFT = arl.SFTConfig(careful_steps=3, habit_steps=2, batch_size=4)


def tokenizer():
    """The active substrate's tokenizer (built once per configuration)."""
    return _tokenizer(active())


@functools.lru_cache(maxsize=None)
def _tokenizer(config):
    return arl.build_tokenizer(arl.make_tasks('all', substrate=config))


@functools.lru_cache(maxsize=None)
def quick_base_dir():
    """One temporary cache folder per test process, so the quick base is built once, not once per test module."""
    folder = Path(tempfile.mkdtemp(prefix='agentrl-quick-base-'))
    atexit.register(shutil.rmtree, folder, True)
    return folder


def quick_base(directory=None):
    """A quickly fine-tuned TinyAgent (cached in `directory`)."""
    torch.set_num_threads(1)
    return arl.make_rl_base(tokenizer(), sft_cfg=QUICK_SFT, directory=directory or quick_base_dir())


def max_param_difference(model_a, model_b):
    return max((a - b).abs().max().item() for a, b in zip(model_a.parameters(), model_b.parameters()))


class WrappedModel(torch.nn.Module):
    """A TinyAgent inside another module (for models that break on purpose); sampling goes to the inner model."""

    def __init__(self, model):
        super().__init__()
        self.model, self.cfg = model, model.cfg

    def new_cache(self, batch_size):
        return self.model.new_cache(batch_size)

    def read(self, ids, cache, start, slots):
        return self.model.read(ids, cache, start, slots)

    def logits(self, features):
        return self.model.logits(features)
