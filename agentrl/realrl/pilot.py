"""The pilot that sets the task's difficulty, and the rule that reads it, fixed before the pilot ran.

GRPO learns only from groups whose rewards differ. So before any run the base model answers each level's training
prompts at temperature 1, PILOT_GROUP replies per prompt, and a level qualifies when

  1. its pass@1 (the mean reward) lies in PASS_BAND, and
  2. fewer than MAX_FLAT_SHARE of its groups are flat (every reply scored the same), and
  3. a run of RUN_STEPS steps of STEP_REPLIES replies, at the step cost the pilot measures, fits RUN_SECONDS.

The code family is preferred when one of its levels qualifies; arithmetic is the fallback. Within a family the level
whose pass@1 is nearest the band's middle wins, the easier one on a tie.
"""
import time
from dataclasses import asdict, dataclass, field

import torch

from agentrl.cpu import fixed_threads
from agentrl.pretrained.loader import MODEL_THREADS
from agentrl.pretrained.sampling import chat_ids, sample
from agentrl.realrl.rewards import reward
from agentrl.realrl.tasks import LEVELS, draw_tasks, make_tasks

PASS_BAND = (0.2, 0.6)  # the base model's pass@1 on the training prompts at temperature 1
MAX_FLAT_SHARE = 0.5  # groups whose replies all score the same: strictly fewer than this share
PILOT_PROMPTS = 24  # training prompts per level, drawn with PILOT_SEED
PILOT_GROUP = 8  # replies per prompt
PILOT_SEED = 7  # a seed no run uses for its prompts
REPLY_TOKENS = {'arithmetic': 12, 'code': 64}  # the reply budget of each family (a reply cut short is not closed)
STEP_REPLIES = 32  # replies per GRPO step (4 prompts x 8)
UPDATES_PER_STEP = 2  # optimiser passes over each batch (clip-higher, Clip-Cov and KL-Cov act only off-policy)
RUN_STEPS = 40  # steps of one run
RUN_SECONDS = 600  # what one run may take on 2 cores
FAMILY_PREFERENCE = ('code', 'arithmetic')


@dataclass
class LevelPilot:
    """What the base model did on one level's pilot prompts, and what a step there costs."""
    level: str
    family: str
    reply_tokens: int
    rewards: list  # [prompts][PILOT_GROUP] 0.0 or 1.0
    sample_seconds: float  # sampling every group, in all
    forward_seconds: float  # one no-grad forward over STEP_REPLIES prompt + reply rows
    train_seconds: float  # one forward and backward over the same rows
    examples: list = field(default_factory=list)  # (prompt, first reply) of the first groups

    @property
    def pass1(self):
        flat = [r for group in self.rewards for r in group]
        return sum(flat) / len(flat)

    @property
    def flat_share(self):
        return sum(len(set(group)) == 1 for group in self.rewards) / len(self.rewards)

    @property
    def step_seconds(self):
        """Projected step: sampling STEP_REPLIES replies, the old and the reference log-probs (two no-grad forwards),
        UPDATES_PER_STEP forward-backward passes."""
        per_reply = self.sample_seconds / (len(self.rewards) * PILOT_GROUP)
        return per_reply * STEP_REPLIES + 2 * self.forward_seconds + UPDATES_PER_STEP * self.train_seconds

    @property
    def in_band(self):
        return PASS_BAND[0] <= self.pass1 <= PASS_BAND[1]

    @property
    def few_flat(self):
        return self.flat_share < MAX_FLAT_SHARE

    @property
    def fits_time(self):
        return RUN_STEPS * self.step_seconds <= RUN_SECONDS

    @property
    def qualifies(self):
        return self.in_band and self.few_flat and self.fits_time

    def as_dict(self):
        return dict(asdict(self), pass1=self.pass1, flat_share=self.flat_share, step_seconds=self.step_seconds,
                    in_band=self.in_band, few_flat=self.few_flat, fits_time=self.fits_time, qualifies=self.qualifies)


def _end_id(tokenizer):
    return tokenizer.convert_tokens_to_ids('<|im_end|>')


def _padded_rows(prompts, samples):
    """Prompt + reply rows, right-padded with 0 -> ids [N, L]; the pilot times a forward over them."""
    rows = [torch.cat([prompt, row]) for prompt, group in zip(prompts, samples) for row in group.tokens]
    ids = torch.zeros(len(rows), max(len(r) for r in rows), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, :len(row)] = row
    return ids


def time_update(model, ids):
    """Seconds of one no-grad forward and of one forward + backward over ids [N, L] (the loss: the mean logit)."""
    with fixed_threads(MODEL_THREADS):
        start = time.perf_counter()
        with torch.no_grad():
            model(ids)
        forward = time.perf_counter() - start
        model.requires_grad_(True)
        start = time.perf_counter()
        model(ids).logits.mean().backward()
        train = time.perf_counter() - start
        model.zero_grad(set_to_none=True)
        model.requires_grad_(False)
    return forward, train


def pilot_level(pretrained, level, sandbox=None, prompts=PILOT_PROMPTS, group=PILOT_GROUP, seed=PILOT_SEED):
    """The base model on `prompts` training prompts of `level`, `group` replies each at temperature 1 -> LevelPilot."""
    pool = make_tasks(level, 'train')  # an unknown level raises here, naming the levels
    family = LEVELS[level]
    model, tok = pretrained.model, pretrained.tokenizer
    generator = torch.Generator().manual_seed(seed)
    tasks = draw_tasks(pool, prompts, generator)
    length = REPLY_TOKENS[family]
    rewards, examples, samples, ids_of = [], [], [], []
    start = time.perf_counter()
    for task in tasks:
        ids = chat_ids(tok, task.user, task.system)
        drawn = sample(model, ids, group, length, generator, end_id=_end_id(tok))
        texts = drawn.texts(tok)
        rewards.append([reward(task, text, sandbox) for text in texts])
        samples.append(drawn)
        ids_of.append(ids)
        if len(examples) < 4:
            examples.append((task.user, texts[0]))
    sample_seconds = time.perf_counter() - start
    per_step = STEP_REPLIES // group
    forward, train = time_update(model, _padded_rows(ids_of[:per_step], samples[:per_step]))
    return LevelPilot(level, family, length, rewards, sample_seconds, forward, train, examples)


def choose(pilots):
    """The level the rule picks from a list of LevelPilot -> its name, or None when no level qualifies."""
    for family in FAMILY_PREFERENCE:
        ladder = [p for p in pilots if p.family == family and p.qualifies]
        if ladder:
            middle = sum(PASS_BAND) / 2
            order = {level: i for i, level in enumerate(LEVELS)}
            return min(ladder, key=lambda p: (abs(p.pass1 - middle), order[p.level])).level
    return None
