"""The pilot that sets the task's difficulty, and the rule that reads it, fixed before the pilot ran.

GRPO learns only from groups whose rewards differ. So before any run the base model answers each level's training
prompts at temperature 1, PILOT_GROUP replies per prompt, and a level qualifies when

  1. its pass@1 (the mean reward) lies in PASS_BAND, and
  2. fewer than MAX_FLAT_SHARE of its groups are flat (every reply scored the same), and
  3. a run of RUN_STEPS steps of STEP_REPLIES replies, at the step cost the pilot measures, fits RUN_SECONDS.

The code family is preferred when one of its levels qualifies; arithmetic is the fallback. Within a family the level
whose pass@1 is nearest the band's middle wins, the easier one on a tie.

The step cost is measured with the engine's own sampler and forward pass as they stand when the pilot runs: the
first round (results/real_pilot.json) read every group's prompt once per reply, later rounds share it.
"""
import time
from dataclasses import asdict, dataclass, field

import torch

from agentrl.cpu import fixed_threads
from agentrl.pretrained.loader import MODEL_THREADS
from agentrl.realrl.policy import CausalLMPolicy, ChatCodec
from agentrl.realrl.rollout import TaskRollout
from agentrl.realrl.tasks import LEVELS, draw_tasks, make_tasks
from agentrl.substrate.grpo import read_widths

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


def time_update(policy, batch):
    """Seconds of one no-grad forward and of one forward + backward of `policy` (a CausalLMPolicy) over a collated
    batch's rows, each read as far as the engine reads it (the loss: the mean logit)."""
    ids, widths = batch['ids'], read_widths(batch['action_mask'])
    with fixed_threads(MODEL_THREADS):
        start = time.perf_counter()
        with torch.no_grad():
            policy(ids, widths)
        forward = time.perf_counter() - start
        policy.requires_grad_(True)
        start = time.perf_counter()
        policy(ids, widths).mean().backward()
        train = time.perf_counter() - start
        policy.zero_grad(set_to_none=True)
        policy.requires_grad_(False)
    return forward, train


def pilot_level(pretrained, level, sandbox=None, prompts=PILOT_PROMPTS, group=PILOT_GROUP, seed=PILOT_SEED):
    """The base model on `prompts` training prompts of `level`, `group` replies each at temperature 1, a step's
    prompts (STEP_REPLIES // group) drawn as one batch as the runs draw them -> LevelPilot."""
    pool = make_tasks(level, 'train')  # an unknown level raises here, naming the levels
    family = LEVELS[level]
    generator = torch.Generator().manual_seed(seed)
    tasks = draw_tasks(pool, prompts, generator)
    length = REPLY_TOKENS[family]
    rollout = TaskRollout(tasks, ChatCodec(pretrained.tokenizer), length, sandbox)
    policy = CausalLMPolicy(pretrained.model, rollout.contexts)
    per_step = STEP_REPLIES // group
    groups = []
    start = time.perf_counter()
    for first in range(0, len(tasks), per_step):
        groups += rollout.groups(policy, tasks[first:first + per_step], group, 1.0, generator, keep_logp=False)
    sample_seconds = time.perf_counter() - start
    forward, train = time_update(policy, rollout.collate(groups[:per_step]))
    rewards = [g.rewards for g in groups]
    examples = [(g.task.user, g.texts[0]) for g in groups[:4]]
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
