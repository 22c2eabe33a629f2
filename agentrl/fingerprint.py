"""One fingerprint of the code that training results depend on: when it changes, RL bases and runs are rebuilt.

It hashes each module's syntax tree with docstrings removed, so comments, docstrings and formatting never
invalidate a cache, while any change to what the code does (a constant, an expression, a call) does.
"""
import ast
import hashlib
import os
import platform
from functools import lru_cache

from agentrl.paths import PACKAGE

# Modules whose code decides an RL base's weights or a run's numbers (relative to agentrl/).
TRAINING_MODULES = ('cpu.py', 'core/logprobs.py', 'core/kl.py', 'core/metrics.py', 'core/off_policy.py', 'core/aggregation.py',
                    'core/entropy_control.py',
                    'substrate/config.py', 'substrate/task_families.py', 'substrate/sandbox.py', 'substrate/gym.py', 'substrate/tokenizer.py', 'substrate/model.py',
                    'substrate/sft.py', 'substrate/rollout.py', 'substrate/grpo.py',
                    'ch10/regularizers.py', 'ch10/framework_plugins.py', 'ch10/evaluation.py', 'ch10/experiments.py')


def _without_docstrings(tree):
    """The tree with the leading string constant of every module, class and function body removed."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


def source_fingerprint(text):
    """SHA-256 of the code in `text` with comments, docstrings and layout ignored."""
    tree = _without_docstrings(ast.parse(text))
    return hashlib.sha256(ast.dump(tree, annotate_fields=True, include_attributes=False).encode()).hexdigest()


@lru_cache(maxsize=1)
def code_fingerprint():
    """SHA-256 over TRAINING_MODULES' code (docstrings and comments ignored)."""
    digest = hashlib.sha256()
    for relative in TRAINING_MODULES:
        digest.update(relative.encode() + b'\0' + source_fingerprint((PACKAGE / relative).read_text()).encode())
    return digest.hexdigest()


def kernel_choice():
    """Which CPU kernels torch computes with here: the machine, ATen's capability and the MKL / oneDNN pins.

    Results computed with other kernels differ in their last digits, so caches are keyed by this too.
    """
    import torch  # only called once agentrl has pinned the kernels (agentrl/__init__.py)

    return dict(machine=platform.machine(), aten=torch.backends.cpu.get_cpu_capability(),
                mkl_cbwr=os.environ.get('MKL_CBWR'), onednn=os.environ.get('ONEDNN_MAX_CPU_ISA'),
                openblas=os.environ.get('OPENBLAS_CORETYPE'), numpy_off=os.environ.get('NPY_DISABLE_CPU_FEATURES'))


def made_by(part, code):
    """Whether a sweep record's part stands for the training code `code`: it was swept by that code, or rerun by it
    and found bit-identical (machinery.certify, for a change that moves no bit, e.g. a refactor)."""
    return part['code'] == code or any(c['code'] == code for c in part.get('certified', ()))
