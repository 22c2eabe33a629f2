"""One description of a substrate: every choice of chapters 1-9 that shapes the RL base and the unregularised run.

A `SubstrateConfig` is frozen and hashable. The task families and the held-out split, the tool-call grammar,
the SFT phases and the scripted agent's habits, the model's parameter-free choices (heads, initialisation,
logit scale), the default RL learning rate and what the advantages make of an episode's number of turns are
all fields of it. The package builds the *active* configuration: `DEFAULT` unless a caller switched to another
with `use(config)` (the calibration does, to measure a candidate beside the default without changing it).

What the chapter itself fixes is not a field: the loop (Adam at a constant learning rate), at least 6 calls per
episode, and the model's shape (2 layers, width 64, MLP width 256, context 256, an untied head with bias).
"""
import contextlib
import dataclasses
import hashlib
import json
from typing import Annotated, Literal

import pydantic
from pydantic import ConfigDict, Field, ValidationError, WrapValidator
from pydantic_core import PydanticCustomError


# The configurations are pydantic dataclasses: still frozen standard dataclasses (asdict, replace, fields, hashing
# and equality as before), with each field's type and range in its annotation, checked on construction. Strict: a
# bool is refused where a number is asked, and a str where a float is; floats must be finite. A bad value raises
# pydantic's ValidationError, a ValueError that names the class, the field, the value and what is allowed. An int
# given for a float field is stored as that float (0 -> 0.0): an equal value, so the same run. Defaults are checked
# too, since RLConfig's lr and turn_cost come from the substrate in use.
CHECKED = ConfigDict(strict=True, allow_inf_nan=False, validate_default=True)


def all_errors_say(allowed):
    """Annotated metadata, after a type and its bounds: any error of the field reads 'Input should be {allowed}'.

    For a range with two ends: pydantic's own message names only the end a value crossed; this one names both (the
    check is still pydantic's)."""
    def validate(value, handler):
        try:
            return handler(value)
        except ValidationError:
            raise PydanticCustomError('allowed_values', 'Input should be {allowed}', {'allowed': allowed}) from None
    return WrapValidator(validate)


SLIP_KINDS = ('mixed', 'choice')
Probability = Annotated[float, Field(ge=0, le=1), all_errors_say('a probability in [0, 1]')]
Positive = Annotated[float, Field(gt=0)]
NonNegative = Annotated[float, Field(ge=0)]
Count = Annotated[int, Field(ge=0)]


@pydantic.dataclasses.dataclass(frozen=True, config=CHECKED)
class Habits:
    """A scripted agent's habits (probabilities)."""
    read: Probability = 0.4  # reads before editing
    full_read: Probability = 0.5  # a read covers the whole function (else a peek at its first two or three lines)
    slip: Probability = 0.06  # before each call, first makes a bad call (of the kinds `slips` names)
    slips: Literal[SLIP_KINDS] = 'mixed'  # 'mixed': malformed calls and out-of-range lines; 'choice': only wrong line
    #                                      labels, so every word the grammar forces (';' after submit, 'to', 'with')
    #                                      stays certain
    mislabel: Probability = 0.0  # after a read that showed the bug, writes the fix on a neighbouring line instead


CAREFUL = Habits(read=1.0, full_read=1.0, slip=0.0)  # always reads the whole function, never slips


@pydantic.dataclasses.dataclass(frozen=True, config=CHECKED)
class SFTConfig:
    """Supervised fine-tuning in two phases: skills from a careful agent, then the scripted agent's habits."""
    careful_steps: Count = 600  # phase 1: AdamW steps on the careful agent's episodes (reading and fixing)
    habit_steps: Count = 150  # phase 2: AdamW steps on the scripted agent's episodes (its habits)
    batch_size: Annotated[int, Field(ge=1)] = 32  # fresh episodes per step
    careful_lr: Positive = 3e-3  # phase 1 peak learning rate (cosine decay to 10%)
    habit_lr: Positive = 1e-3  # phase 2 peak learning rate (cosine decay to 10%)
    weight_decay: NonNegative = 0.01
    seed: Count = 0
    habits: Habits = Habits()  # the scripted agent of phase 2


FAMILY_SETS = ('base', 'extended')  # 'base': the 36 families of FAMILY_TABLE; 'extended': 15 more after them
HELDOUT_RULES = ('any_line', 'fresh_line')
GRAMMARS = ('short', 'long')
N_HEADS = (1, 2, 4, 8, 16, 32, 64)  # the divisors of the model's width 64


@pydantic.dataclasses.dataclass(frozen=True, config=CHECKED)
class SubstrateConfig:
    """Every free choice of chapters 1-9 that shapes the RL base and the unregularised run (frozen, hashable)."""
    families: Literal[FAMILY_SETS] = 'base'  # which task families exist
    heldout: Literal[HELDOUT_RULES] = 'any_line'  # held-out split: 'any_line' (one bug of each of 10 families,
    #                           anywhere) or 'fresh_line' (only on a line where no training bug of its family sits, so
    #                           a blind guess among the family's training bugs never fixes it)
    grammar: Literal[GRAMMARS] = 'short'  # tool calls: 'short' (read L2 L5 ; edit L4 < > ;) or 'long' (read L2 to
    #                                      L5 ; edit L4 replace < with > ;)
    max_offset: Count = 12  # at most this many blank lines before the function (also capped by what fits in L12)
    sft: SFTConfig = SFTConfig()  # how the RL base is fine-tuned, and the habits it keeps
    n_head: Literal[N_HEADS] = 4  # attention heads (does not change the parameter count)
    init_std: Positive = 0.02  # std of the normal initialisation (residual projections: divided by sqrt(2 layers))
    logit_scale: Positive = 1.0  # the head's logits are multiplied by this
    rl_lr: Positive = 5e-4  # the default RLConfig.lr (chapter 9's Adam learning rate, constant)
    turn_cost: NonNegative = 0.0  # the default RLConfig.turn_cost: advantage units an episode pays per turn above its
    #                              group's mean, in groups that carry a reward signal (0: the turns are ignored)

    def describe(self):
        """Every field as plain JSON data (nested configurations as dicts)."""
        return json.loads(json.dumps(dataclasses.asdict(self)))

    def key(self):
        """SHA-256 of describe(): names this configuration in caches and records."""
        return hashlib.sha256(json.dumps(self.describe(), sort_keys=True).encode()).hexdigest()

    @classmethod
    def from_description(cls, description):
        """The configuration describe() returned (a dict), rebuilt; unknown fields raise ValueError naming them."""
        description = dict(description)
        sft = dict(description.pop('sft', {}))
        habits = Habits(**_known(Habits, sft.pop('habits', {})))
        return cls(sft=SFTConfig(habits=habits, **_known(SFTConfig, sft)), **_known(cls, description))


def _known(cls, values):
    allowed = {field.name for field in dataclasses.fields(cls)}
    unknown = set(values) - allowed
    if unknown:
        raise ValueError(f'{cls.__name__}: unknown fields {sorted(unknown)}; allowed: {sorted(allowed)}')
    return values


# Named configurations the package can build. 'main' is the substrate before the calibration. 'c18' re-creates, from
# the notes of the hand search before the recorded one, its best candidate: long calls, 15 more families, offsets up
# to 2, a held-out split on fresh lines, logit scale 0.35, 1200 careful SFT steps and a mislabel habit, lr 3.5e-4
# (its learning-rate warm-up and its limit of 3 turns are left out: the chapter fixes a constant rate and at least 6
# calls).
CANDIDATES = {
    'main': SubstrateConfig(),
    'c18': SubstrateConfig(families='extended', heldout='fresh_line', grammar='long', max_offset=2,
                           sft=SFTConfig(careful_steps=1200, habits=Habits(mislabel=0.15)), logit_scale=0.35,
                           rl_lr=3.5e-4),
    # Trial 45 of the calibration search (calibration/), frozen by its rule's fallback once the 6 h budget was used:
    # of the five best on seeds 0-4, it held the most rows on the confirmation seeds 5-9 (24 and 23 of 26 at search
    # time; 23 is thus the largest of five counts, not an untouched score: TINYAGENT.md).
    't45': SubstrateConfig(families='extended', max_offset=1,
                           sft=SFTConfig(careful_steps=1200, habit_steps=300, habit_lr=0.0022238488169320893,
                                         habits=Habits(read=0.203181671965698, full_read=0.5585192428621829,
                                                       slip=0.03796999118220847, slips='choice',
                                                       mislabel=0.20427428308987738)),
                           n_head=8, init_std=0.03304456554488947, logit_scale=0.43491169928179546,
                           rl_lr=0.0004527666984975247, turn_cost=0.38819814780564904),
    # Trial 8 of the second study (calibration/long-grammar/), which fixed the book's long call grammar: frozen by the
    # same fallback once its 6 h budget was used (22 of 26 rows on seeds 0-4 and 22 on seeds 5-9). The rule fixed
    # before that search makes it the default only with all 26 rows and at least 24 on seeds 5-9, so it stays a named
    # candidate beside trial 45.
    'long': SubstrateConfig(families='extended', grammar='long', max_offset=1,
                            sft=SFTConfig(careful_steps=1200, habit_steps=300, habit_lr=0.00173357276057227,
                                          habits=Habits(read=0.2429964431588086, full_read=0.555820964397468,
                                                        slip=0.04583855755568492, slips='choice',
                                                        mislabel=0.18089938876704317)),
                            init_std=0.03333792369236283, logit_scale=0.3292560749121611,
                            rl_lr=0.0004566507996477841, turn_cost=0.4922367648760885),
}
DEFAULT = CANDIDATES['t45']  # the substrate the notebooks use: frozen at trial 45 of the calibration search

_ACTIVE = []  # configurations switched on by use(), innermost last


def active():
    """The configuration the package builds now: the innermost use(), else DEFAULT."""
    return _ACTIVE[-1] if _ACTIVE else DEFAULT


@contextlib.contextmanager
def use(config):
    """Build `config` instead of DEFAULT inside this block (tasks, tokenizer, RL base, RLConfig defaults)."""
    if not isinstance(config, SubstrateConfig):
        raise TypeError(f'use() takes a SubstrateConfig, got {type(config).__name__}')
    _ACTIVE.append(config)
    try:
        yield config
    finally:
        _ACTIVE.pop()
