"""The SmolLM2 loader's checks: a missing or damaged file gets one error that names the install command."""
import hashlib

import pytest

from agentrl.pretrained import loader


def test_a_damaged_file_is_refused_with_both_hashes_and_the_install_command(tmp_path):
    damaged = tmp_path / loader.GGUF_NAME
    damaged.write_bytes(b'GGUF' + b'\0' * 1000)
    with pytest.raises(loader.ModelFileError) as caught:
        loader.checked_gguf(damaged)
    message = str(caught.value)
    assert 'damaged' in message and loader.GGUF_SHA256 in message
    assert hashlib.sha256(damaged.read_bytes()).hexdigest() in message
    assert '--force-reinstall -r requirements-model.txt' in message


def test_a_missing_file_names_the_install_command(tmp_path):
    with pytest.raises(loader.ModelFileError, match='missing.*pip install .*requirements-model.txt'):
        loader.checked_gguf(tmp_path / loader.GGUF_NAME)


def test_a_missing_wheel_names_the_install_command(monkeypatch):
    monkeypatch.setattr(loader.importlib.util, 'find_spec', lambda name: None)
    with pytest.raises(loader.ModelFileError, match='not installed.*pip install .*requirements-model.txt'):
        loader.default_gguf_path()


def test_a_file_with_the_pinned_hash_passes(tmp_path, monkeypatch):
    good = tmp_path / loader.GGUF_NAME
    good.write_bytes(b'stand-in')
    monkeypatch.setattr(loader, 'GGUF_SHA256', hashlib.sha256(b'stand-in').hexdigest())
    assert loader.checked_gguf(good) == good


def test_the_sha256_is_read_in_pieces_and_matches_hashlib(tmp_path):
    data = bytes(range(256)) * 41
    (tmp_path / 'f').write_bytes(data)
    assert loader.sha256_of(tmp_path / 'f', chunk=1000) == hashlib.sha256(data).hexdigest()


def test_the_damaged_file_never_reaches_transformers(tmp_path, monkeypatch):
    """load_smollm2 checks before it reads: a damaged path raises and nothing is cached."""
    damaged = tmp_path / loader.GGUF_NAME
    damaged.write_bytes(b'not a model')
    with pytest.raises(loader.ModelFileError):
        loader.load_smollm2(damaged)
    assert str(damaged) not in loader._LOADED
