"""Caches that cannot lie: checksummed, fully described, atomic, with the tree's permissions, checked first."""
import errno
import os
import re
import shutil
import subprocess
import warnings
from collections import namedtuple

import pytest
import torch

import agentrl as arl
from agentrl.ch10 import experiments
from agentrl.substrate import sft
from agentrl.verified_cache import checksum, load_verified, save_verified
from substrate_fixtures import max_param_difference, tokenizer

TINY = arl.SFTConfig(careful_steps=3, habit_steps=2, batch_size=4)
UMASK = 0o027  # not the usual 0o022, so the test sees the umask applied rather than a coincidence
BIG = dict(w=torch.zeros(100_000))  # 400 kB of tensors: more than the small file system below holds
DiskUsage = namedtuple('DiskUsage', 'total used free')


def zip_writer_failed():
    """The RuntimeError torch's zip writer raises when a write is cut short (as on a full disk)."""
    return RuntimeError('[enforce fail at inline_container.cc:672] . unexpected pos 896 vs 790')


def build_forbidden(*args, **kwargs):
    raise AssertionError('built although a valid cache file exists (or before the path was checked)')


def train_forbidden(spec):
    raise AssertionError('trained although a valid run file exists (or before the path was checked)')


def failing_save(error):
    """A stand-in for torch.save that writes half a file, then raises error."""
    def half_written(obj, file):
        with open(file, 'wb') as handle:
            handle.write(b'half a file')
        raise error
    return half_written


def free_space(free):
    """A stand-in for shutil.disk_usage that reports free bytes free."""
    return lambda folder: DiskUsage(total=1 << 40, used=(1 << 40) - free, free=free)


def flip_byte_inside(path, tensor):
    """Flip one bit inside tensor's bytes where they sit in the file (torch.load does not notice)."""
    data = bytearray(path.read_bytes())
    at = data.find(tensor.detach().contiguous().numpy().tobytes())
    assert at >= 0, 'the tensor data was not found in the file'
    data[at + 5] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.fixture(scope='module')
def rl_base_file(tmp_path_factory):
    """A tiny RL base built once, under UMASK -> (its cache file, its state_dict)."""
    directory = tmp_path_factory.mktemp('rl_base')
    old = os.umask(UMASK)
    try:
        model = arl.make_rl_base(tokenizer(), sft_cfg=TINY, directory=directory)
    finally:
        os.umask(old)
    [path] = directory.iterdir()
    return path, {k: v.clone() for k, v in model.state_dict().items()}


@pytest.fixture()
def fake_runs(tmp_path, monkeypatch):
    """Runs in tmp_path with a stand-in RL base and training (deterministic, instant) -> the specs trained."""
    monkeypatch.setenv('AGENTRL_RUNS_DIR', str(tmp_path / 'runs'))
    base = torch.nn.Linear(3, 2)
    torch.nn.init.constant_(base.weight, 0.5)
    monkeypatch.setattr(experiments, 'substrate', lambda: (None, None, None, base))
    trained = []

    def train(spec):
        trained.append(spec)
        weights = torch.randn(4, 8, generator=torch.Generator().manual_seed(spec.seed))
        return dict(history=[dict(step=0, reward=0.25)], metrics=dict(pass1=0.5), vocab_size=7,
                    state_dict={'w': weights})

    monkeypatch.setattr(experiments, 'train_and_evaluate', train)
    return trained


def test_a_flipped_byte_in_rl_base_weights_is_caught_and_rebuilt(rl_base_file, tmp_path, monkeypatch):
    original, weights = rl_base_file
    path = tmp_path / original.name
    shutil.copy(original, path)
    key = next(k for k, v in weights.items() if v.dim() == 2)
    flip_byte_inside(path, weights[key])
    torch.load(path, weights_only=True)  # still loads: only the checksum can tell
    with pytest.warns(UserWarning, match='checksum mismatch'):
        rebuilt = arl.make_rl_base(tokenizer(), sft_cfg=TINY, directory=tmp_path)
    assert all(torch.equal(rebuilt.state_dict()[k], v) for k, v in weights.items())
    monkeypatch.setattr(sft, 'build_rl_base', build_forbidden)
    with warnings.catch_warnings():
        warnings.simplefilter('error')  # the rewritten file is trusted again
        assert max_param_difference(rebuilt, arl.make_rl_base(tokenizer(), sft_cfg=TINY, directory=tmp_path)) == 0.0


def test_a_flipped_byte_in_a_run_file_is_caught_and_rerun(fake_runs):
    spec = experiments.arm('tiny', dict(kl_coef=0.1), steps=2)
    first = experiments.ensure_run(spec)
    flip_byte_inside(experiments.run_path(spec), first['state_dict']['w'])
    with pytest.warns(UserWarning, match='checksum mismatch.*will be recomputed'):
        again = experiments.ensure_run(spec)
    assert len(fake_runs) == 2 and torch.equal(again['state_dict']['w'], first['state_dict']['w'])
    assert again['provenance'] == first['provenance'] == experiments.provenance(spec)
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        experiments.ensure_run(spec)
    assert len(fake_runs) == 2


def test_a_run_file_made_for_another_spec_is_rerun(fake_runs):
    spec = experiments.arm('tiny', dict(lr=1e-3), steps=2)
    described = experiments.provenance(spec)
    other = {**described, 'spec': {**described['spec'], 'fields': [['lr', 2e-3]]}}
    save_verified(experiments.run_path(spec), dict(history=[], metrics={}, vocab_size=7, state_dict={}), other)
    with pytest.warns(UserWarning, match="does not match at 'spec.fields'"):
        run = experiments.ensure_run(spec)
    assert fake_runs == [spec] and run['provenance'] == described


def test_dict_fields_keep_every_value(fake_runs):
    a, b = experiments.RunSpec('a', fields=dict(lr=1e-3)), experiments.RunSpec('a', fields=dict(lr=2e-3))
    assert a.fields == (('lr', 1e-3),) and a == experiments.arm('a', dict(lr=1e-3))
    assert a.describe()['fields'] == [['lr', 1e-3]] and b.describe()['fields'] == [['lr', 2e-3]]
    assert experiments.provenance(a)['spec']['fields'] == [['lr', 1e-3]]
    assert experiments.run_path(a) != experiments.run_path(b)
    unordered = experiments.RunSpec('c', fields=[('temperature', 1.3), ('kl_coef', 0.3)])
    assert unordered.fields == (('kl_coef', 0.3), ('temperature', 1.3)) and hash(unordered)


def test_the_policy_loss_is_kept_apart_from_the_rl_settings(fake_runs):
    covariance = experiments.arm('c', dict(kl_coef=0.3), policy_loss=dict(variant='kl_cov', fraction=0.05))
    assert covariance.fields == (('kl_coef', 0.3),)
    assert covariance.loss_options() == dict(variant='kl_cov', fraction=0.05)
    assert covariance.config() == experiments.arm('plain', dict(kl_coef=0.3)).config()
    assert experiments.arm('plain').loss_options() is None
    assert covariance.describe()['policy_loss'] == [['fraction', 0.05], ['variant', 'kl_cov']]
    assert experiments.run_path(covariance) != experiments.run_path(experiments.arm('c', dict(kl_coef=0.3)))


@pytest.mark.parametrize('kwargs, error, match', [
    (dict(fields='lr'), TypeError, 'fields must be a dict or a tuple of'),
    (dict(fields=(('lr',),)), TypeError, r"got the item \('lr',\)"),
    (dict(fields=((1, 2.0),)), TypeError, 'str names'),
    (dict(policy_loss=(('variant', 'clip_cov'), ('bounds', [1.0, 5.0]))), TypeError,
     r'policy_loss: bounds .* not a plain value.*tuples'),
    (dict(policy_loss=dict(variant='kl_cov', cov_fraction=0.1)), ValueError,
     r'policy_loss\n.*unknown setting cov_fraction; allowed: variant, fraction, bounds, kl_coef'),
    (dict(policy_loss=dict(fraction=0.1)), ValueError, r"policy_loss\n.*needs a variant, one of clip_cov, kl_cov"),
    (dict(policy_loss=dict(variant='clip')), ValueError, "variant must be one of 'clip_cov', 'kl_cov'"),
    (dict(policy_loss=dict(variant='kl_cov', fraction=2.0)), ValueError, 'cov_fraction must be a number in'),
    (dict(fields=dict(cov_fraction=0.1)), ValueError,
     r'fields: cov_fraction is not an RLConfig setting \(the covariance-aware loss goes in policy_loss\); allowed: '),
    (dict(fields=dict(seed=3)), ValueError, 'seed is not an RLConfig setting'),
    (dict(fields=(('lr', torch.tensor(1e-3)),)), TypeError, 'lr .* not a plain value'),
    (dict(fields=(('lr', float('nan')),)), TypeError, 'finite numbers'),
    (dict(fields=(('lr', 1e-3), ('lr', 2e-3))), ValueError, 'more than once'),
    (dict(init='baseline'), ValueError, r'init\n.*instance of RunSpec'),
    (dict(reference='yesterday'), ValueError, r"reference\n.*'start' or 'rl_base'"),
    (dict(steps=0), ValueError, r'steps\n.*greater than or equal to 1'),
    (dict(entropy_coef=-0.1), ValueError, r'entropy_coef\n.*greater than or equal to 0'),
    (dict(kl_target=0.0), ValueError, r'kl_target\n.*greater than 0'),
    (dict(seed=-1), ValueError, r'seed\n.*a torch.Generator seed'),
    (dict(probes=('heldout:0',)), ValueError, r"probes.0\n.*'heldout:N' \(N >= 1\) or 'covariance'"),
    (dict(probes=('covariance ',)), ValueError, r"probes.0\n"),
    (dict(kl_in_reward=1), ValueError, r'kl_in_reward\n.*valid boolean')])
def test_bad_run_specs_are_rejected_clearly(kwargs, error, match):
    with pytest.raises(error, match=match):
        experiments.RunSpec('x', **kwargs)


def test_a_directory_at_a_cache_path_stops_before_any_work(rl_base_file, tmp_path, fake_runs, monkeypatch):
    in_the_way = tmp_path / rl_base_file[0].name
    in_the_way.mkdir()
    monkeypatch.setattr(sft, 'build_rl_base', build_forbidden)
    with pytest.raises(IsADirectoryError, match=in_the_way.name):
        arl.make_rl_base(tokenizer(), sft_cfg=TINY, directory=tmp_path)
    spec = experiments.arm('tiny', steps=2)
    experiments.run_path(spec).mkdir(parents=True)
    monkeypatch.setattr(experiments, 'train_and_evaluate', train_forbidden)
    with pytest.raises(IsADirectoryError, match=experiments.run_path(spec).name):
        experiments.ensure_run(spec)
    assert in_the_way.is_dir() and experiments.run_path(spec).is_dir()  # never deleted


def test_cache_files_get_the_trees_permissions(rl_base_file, fake_runs):
    assert rl_base_file[0].stat().st_mode & 0o777 == 0o666 & ~UMASK
    old = os.umask(UMASK)
    try:
        experiments.ensure_run(experiments.arm('tiny', steps=2))
    finally:
        os.umask(old)
    [run_file] = experiments.run_path(experiments.arm('tiny', steps=2)).parent.iterdir()
    assert run_file.stat().st_mode & 0o777 == 0o666 & ~UMASK


def test_a_failed_save_leaves_no_temporary_file_and_the_old_file_intact(tmp_path, monkeypatch):
    path = tmp_path / 'thing.pt'
    save_verified(path, dict(w=torch.ones(3)), dict(version=1))
    monkeypatch.setattr(torch, 'save', failing_save(OSError('disk full')))
    with pytest.raises(OSError, match='disk full'):
        save_verified(path, dict(w=torch.zeros(3)), dict(version=1))
    with pytest.raises(TypeError):
        save_verified(path, dict(w=object()), dict(version=1))  # not checksummable: refused before writing
    monkeypatch.undo()
    assert [p.name for p in tmp_path.iterdir()] == ['thing.pt']
    assert torch.equal(load_verified(path, dict(version=1))['w'], torch.ones(3))


def overwrite_fails(path, monkeypatch=None, error=None, free=None):
    """Overwrite path's file with BIG (with monkeypatch: torch.save raising error, free bytes free) -> what it raised.

    Whatever was raised, the old file must be there byte for byte, with no temporary file left beside it.
    """
    old = path.read_bytes()
    if monkeypatch:
        monkeypatch.setattr(torch, 'save', failing_save(error))
        monkeypatch.setattr(shutil, 'disk_usage', free_space(free))
    with pytest.raises((OSError, RuntimeError)) as raised:
        save_verified(path, BIG, dict(version=2))
    assert [p.name for p in path.parent.iterdir()] == [path.name] and path.read_bytes() == old
    return raised.value


def says_the_disk_is_full(error, folder):
    """Whether error is the clear ENOSPC OSError for run-abc.pt in folder."""
    said = (rf'\[Errno 28\] no space left on the device holding {re.escape(str(folder))} \(.* free, '
            r'400\.0 kB of tensors to write\): could not write run-abc\.pt \(the previous file, if any, is kept\)')
    return isinstance(error, OSError) and error.errno == errno.ENOSPC and re.fullmatch(said, str(error)) is not None


@pytest.mark.parametrize('error, free', [
    (OSError(errno.ENOSPC, 'No space left on device'), 1 << 40),  # the write said so itself
    (zip_writer_failed(), 0),  # torch's zip writer did not, but nothing is free
    (zip_writer_failed(), 100_000)])  # nor here, and less is free than was being written
def test_a_full_disk_says_so_and_keeps_the_old_file(tmp_path, monkeypatch, error, free):
    path = tmp_path / 'run-abc.pt'
    path.write_bytes(b'the previous run')
    raised = overwrite_fails(path, monkeypatch, error, free)
    assert says_the_disk_is_full(raised, tmp_path) and raised.__cause__ is error


@pytest.mark.parametrize('error, free', [
    (zip_writer_failed(), 1 << 40),  # plenty of room: something else went wrong in the writer
    (RuntimeError('CUDA error: an illegal memory access was encountered'), 0),  # not the writer's error
    (OSError(errno.EIO, 'Input/output error'), 0)])  # not ENOSPC
def test_other_failed_saves_are_re_raised_unchanged(tmp_path, monkeypatch, error, free):
    path = tmp_path / 'run-abc.pt'
    path.write_bytes(b'the previous run')
    raised = overwrite_fails(path, monkeypatch, error, free)
    assert raised is error and raised.__cause__ is None


@pytest.fixture()
def small_file_system(tmp_path):
    """A folder on a 64 kB tmpfs of its own (skips where mounting one is not permitted)."""
    folder = tmp_path / 'small'
    folder.mkdir()
    try:
        mounted = subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', str(folder)],
                                 capture_output=True, text=True)
    except FileNotFoundError:
        pytest.skip('no mount command here, so no small file system to fill')
    if mounted.returncode:
        why = ' '.join(mounted.stderr.split())
        pytest.skip(f'mounting a 64 kB tmpfs is not permitted here (it needs root): {why}')
    yield folder
    subprocess.run(['umount', '--lazy', str(folder)], check=True)


def test_a_real_full_disk_says_so_and_keeps_the_old_file(small_file_system):
    path = small_file_system / 'run-abc.pt'
    save_verified(path, dict(w=torch.ones(3)), dict(version=1))
    raised = overwrite_fails(path)  # torch's own zip writer, on a file system that fills up
    assert says_the_disk_is_full(raised, small_file_system) and isinstance(raised.__cause__, RuntimeError)


def test_the_checksum_covers_values_dtypes_shapes_and_keys():
    t = torch.arange(6, dtype=torch.float32)
    base = checksum(dict(w=t, n=[1, 'a', None]))
    assert base == checksum(dict(n=[1, 'a', None], w=t.clone()))  # content, not identity or key order
    others = [dict(w=t.reshape(2, 3), n=[1, 'a', None]), dict(w=t.double(), n=[1, 'a', None]),
              dict(v=t, n=[1, 'a', None]), dict(w=t, n=[1, 'a', 0]), dict(w=t, n=[True, 'a', None])]
    assert len({base, *map(checksum, others)}) == 6


def test_an_unreadable_or_foreign_file_is_reported_and_not_trusted(tmp_path):
    path = tmp_path / 'thing.pt'
    assert load_verified(path, {}) is None  # missing: no warning
    path.write_bytes(b'not a torch file')
    with pytest.warns(UserWarning, match='unreadable'):
        assert load_verified(path, {}) is None
    torch.save(dict(key='old format', state_dict={}), path)
    with pytest.warns(UserWarning, match='none is stored'):
        assert load_verified(path, {}) is None


@pytest.mark.parametrize('count, said', [
    (0, '0 bytes'), (999, '999 bytes'), (1000, '1.0 kB'), (999_949, '999.9 kB'), (10 ** 6, '1.0 MB'),
    (1_500_000, '1.5 MB'), (10 ** 9, '1.0 GB'), (2_500_000_000, '2.5 GB'), (10 ** 12, '1.0 TB'),
    (5 * 10 ** 15, '5000.0 TB')])  # beyond the last unit the count keeps growing
def test_byte_counts_are_said_in_the_largest_unit_below_a_thousand(count, said):
    from agentrl.verified_cache import _amount
    assert _amount(count) == said


def unknown_free_space(folder):
    raise FileNotFoundError(errno.ENOENT, 'No such file or directory', str(folder))


@pytest.mark.parametrize('free, payload, room', [
    (unknown_free_space, BIG, ' (400.0 kB of tensors to write)'),
    (free_space(2048), dict(step=3, names=['a']), ' (2.0 kB free)'),  # no tensors: no size to give
    (unknown_free_space, dict(step=3, names=['a']), '')])  # nothing known to give
def test_a_full_disk_names_only_the_amounts_it_knows(tmp_path, monkeypatch, free, payload, room):
    path = tmp_path / 'run-abc.pt'
    monkeypatch.setattr(torch, 'save', failing_save(OSError(errno.ENOSPC, 'No space left on device')))
    monkeypatch.setattr(shutil, 'disk_usage', free)
    with pytest.raises(OSError) as raised:
        save_verified(path, payload, dict(version=1))
    assert str(raised.value) == (f'[Errno 28] no space left on the device holding {tmp_path}{room}: could not write '
                                 'run-abc.pt (the previous file, if any, is kept)')


def test_a_zip_writer_failure_counts_as_a_full_disk_only_when_the_free_space_is_known_to_fall_short(tmp_path,
                                                                                                   monkeypatch):
    from agentrl.verified_cache import NEAR_ZERO, _disk_full_error, _tensor_bytes
    path, error = tmp_path / 'run-abc.pt', zip_writer_failed()
    size = _tensor_bytes(BIG)
    assert size == 400_000
    monkeypatch.setattr(shutil, 'disk_usage', free_space(size + NEAR_ZERO - 1))
    assert _disk_full_error(path, error, size).errno == errno.ENOSPC
    monkeypatch.setattr(shutil, 'disk_usage', free_space(size + NEAR_ZERO))  # room enough: another failure
    assert _disk_full_error(path, error, size) is None
    monkeypatch.setattr(shutil, 'disk_usage', unknown_free_space)  # nothing says the disk is full
    assert _disk_full_error(path, error, size) is None
