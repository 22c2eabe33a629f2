"""Cache files that cannot lie: each one carries a checksum of its payload and the full description of what made it.

A file is dict(format, description, checksum, payload) written with torch.save. Loading compares the stored
description with the expected one key by key and recomputes the checksum, so a file made by other settings or
code, or one whose bytes changed on disk (even inside tensor data, which torch.load does not notice), is
reported with a warning and treated as missing: the caller rebuilds it. Nothing is ever trusted unverified.
A save that fails because the disk is full says so (OSError ENOSPC naming the file) and keeps the old file.
"""
import errno
import hashlib
import json
import re
import shutil
import warnings
from pathlib import Path

import torch

from agentrl.atomic import atomic_output

FORMAT = 1  # bump when the layout of a cache file changes
# torch's zip writer does not pass on the write's errno: a full disk surfaces as one of its own RuntimeErrors
ZIP_WRITER_ERROR = re.compile(r'inline_container|PytorchStreamWriter')
NEAR_ZERO = 1 << 20  # bytes: room for the zip's headers and pickled structure, and for what other writers take


def _plain(value):
    """Canonical JSON text of a plain value (TypeError for anything that is not JSON-able)."""
    return json.dumps(value, sort_keys=True)


def _feed(digest, value):
    """Add value to digest: tensors as dtype, shape and raw bytes; dicts by sorted key; lists and tuples in order."""
    if isinstance(value, torch.Tensor):
        tensor = value.detach().cpu().contiguous()
        digest.update(f'T{tensor.dtype}{tuple(tensor.shape)}:'.encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    elif isinstance(value, dict):
        digest.update(f'D{len(value)}:'.encode())
        for key in sorted(value, key=_plain):
            digest.update(_plain(key).encode() + b'=')
            _feed(digest, value[key])
    elif isinstance(value, (list, tuple)):
        digest.update(f'L{len(value)}:'.encode())
        for item in value:
            _feed(digest, item)
    else:
        digest.update(b'V' + _plain(value).encode() + b';')


def checksum(payload):
    """SHA-256 of payload's content (tensors bit for bit, plain values as canonical JSON)."""
    digest = hashlib.sha256()
    _feed(digest, payload)
    return digest.hexdigest()


def _first_difference(stored, expected, where=''):
    """The dotted key at which two descriptions first differ ('' if they differ as a whole)."""
    if isinstance(stored, dict) and isinstance(expected, dict):
        for key in sorted(set(stored) | set(expected)):
            if key not in stored or key not in expected or _plain(stored[key]) != _plain(expected[key]):
                return _first_difference(stored.get(key), expected.get(key), f'{where}.{key}' if where else key)
    return where


def _check_place(path):
    """Refuse, before any work is done, a path whose file could never be written (a directory is in the way)."""
    if path.is_dir():
        raise IsADirectoryError(f'{path} is a directory, but the cache file belongs there; move it away '
                                '(it is not deleted automatically)')
    if path.parent.exists() and not path.parent.is_dir():
        raise NotADirectoryError(f'{path.parent} is a file, but the cache directory for {path.name} belongs there')


def _problem(stored, description):
    """Why a loaded file cannot be trusted for this description, or None if it can."""
    if not isinstance(stored, dict) or 'description' not in stored:
        return 'provenance does not match: none is stored (a file of an older format)'
    if _plain(stored['description']) != _plain(description):
        key = _first_difference(stored['description'], description)
        return f"provenance does not match at {key!r}" if key else 'provenance does not match'
    if stored.get('format') != FORMAT:
        return f"format {stored.get('format')!r} is not {FORMAT}"
    if stored.get('checksum') != checksum(stored.get('payload')):
        return 'checksum mismatch: the payload changed after it was written'
    return None


def load_verified(path, description, what='cache file'):
    """The payload saved at path for exactly this description, or None if there is none or it is unusable.

    An unusable file (unreadable, checksum mismatch, other description) gives a warning saying why; the caller
    then rebuilds it. A directory at path raises IsADirectoryError at once, before the caller starts any work.
    """
    path = Path(path)
    _check_place(path)
    if not path.exists():
        return None
    description = json.loads(_plain(description))
    try:
        stored = torch.load(path, weights_only=True)
        problem = _problem(stored, description)
    except Exception as error:  # noqa: BLE001 - whatever is wrong with the file, it is rebuilt, never trusted
        problem = f'unreadable: {error}'
    if problem:
        warnings.warn(f'{what} {path} is unusable ({problem}); it will be recomputed', stacklevel=3)
        return None
    return stored['payload']


def save_verified(path, payload, description):
    """Write payload with its checksum and description to path, atomically, with permissions 0666 & ~umask."""
    path = Path(path)
    _check_place(path)
    record = dict(format=FORMAT, description=json.loads(_plain(description)), checksum=checksum(payload),
                  payload=payload)
    try:
        with atomic_output(path, path.suffix) as temporary:
            torch.save(record, temporary)
    except (OSError, RuntimeError) as error:
        full = _disk_full_error(path, error, _tensor_bytes(record))
        if full is None:
            raise
        raise full from error


def _tensor_bytes(value):
    """How many bytes of tensor data value holds (in dicts, lists and tuples too)."""
    if isinstance(value, torch.Tensor):
        return value.nbytes
    if isinstance(value, dict):
        value = list(value.values())
    return sum(map(_tensor_bytes, value)) if isinstance(value, (list, tuple)) else 0


def _amount(count):
    """A byte count as people read it: '512 bytes', '64.0 kB', '1.5 GB'."""
    if count < 1000:
        return f'{count} bytes'
    for unit in ('kB', 'MB', 'GB', 'TB'):
        count /= 1000
        if count < 1000 or unit == 'TB':
            return f'{count:.1f} {unit}'


def _disk_full_error(path, error, size):
    """The OSError ENOSPC to raise if error, met writing size bytes of tensors to path, came from a full disk; or None.

    An ENOSPC OSError always did. torch's zip writer reports a failed write only as a RuntimeError, so one of those
    counts when the folder's free space (measured once the temporary file is gone) could not have held the file.
    """
    if isinstance(error, OSError):
        if error.errno != errno.ENOSPC:
            return None
    elif not ZIP_WRITER_ERROR.search(str(error)):
        return None
    folder = path.parent
    try:
        free = shutil.disk_usage(folder).free
    except OSError:  # the folder itself could not be made: its free space is unknown
        free = None
    if isinstance(error, RuntimeError) and (free is None or free >= size + NEAR_ZERO):
        return None
    room = [f'{_amount(free)} free'] if free is not None else []
    room += [f'{_amount(size)} of tensors to write'] if size else []
    room = f' ({", ".join(room)})' if room else ''
    return OSError(errno.ENOSPC, f'no space left on the device holding {folder}{room}: could not write {path.name} '
                                 '(the previous file, if any, is kept)')
