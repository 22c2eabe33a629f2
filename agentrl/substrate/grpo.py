"""The one GRPO engine of the project (chapter 9): settings, advantages, the clipped surrogate, the update, the loop.

Extra terms join the engine as plug-ins (subclasses of `Plugin`) instead of copies of the loop: a plug-in
can shape rewards, look at each minibatch's forward pass, reshape the per-token surrogate, add to the loss,
measure before and after each update, and adjust its own coefficients between steps. Chapter 9's own KL-to-reference term is such a plug-in
(`ReferenceKL`); chapter 10's regularisers live in agentrl.ch10.regularizers and use the same hooks.
"""
import copy
import math
import dataclasses
from typing import Annotated, Literal, Optional

import pydantic
import torch
from pydantic import AfterValidator, Field

from agentrl.cpu import adam, fixed_threads
from agentrl.core.aggregation import AGGREGATIONS, aggregate
from agentrl.core.kl import KL_KINDS, check_kl_kind, kl_penalty
from agentrl.core.logprobs import check_same_shape, entropy_from_logits, masked_mean, selected_log_probs
from agentrl.core.off_policy import KL_WEIGHTINGS, clipped_objective, ratio_weighted_kl
from agentrl.progress import progress
from agentrl.substrate.config import CHECKED, NonNegative, Positive, active, all_errors_say
from agentrl.substrate.gym import make_env, make_tasks
from agentrl.substrate.rollout import behavior_stats, collate, sample_groups, sample_step

TRAIN_THREADS = 1  # torch threads while training: fixed, so results never depend on the caller's thread count


MIN_TEMPERATURE, MAX_TEMPERATURE = 0.01, 100.0
Temperature = Annotated[float, Field(ge=MIN_TEMPERATURE, le=MAX_TEMPERATURE), all_errors_say(
    f"a finite number in [{MIN_TEMPERATURE}, {MAX_TEMPERATURE}] (beyond, logits / temperature leave float32's useful "
    'range)')]
Seed = Annotated[int, Field(ge=0, lt=2 ** 63), all_errors_say('an int in [0, 2**63) (a torch.Generator seed)')]


def _known_kl_kind(kind):
    check_kl_kind(kind)  # the estimators' own check, so the list of kinds has one home
    return kind


# A pydantic dataclass, as the substrate's configurations (agentrl.substrate.config.CHECKED): each field's type and
# range is in its annotation, and a bad value raises pydantic's ValidationError (a ValueError) naming the field, the
# value and what is allowed.
@pydantic.dataclasses.dataclass(frozen=True, config=CHECKED)
class RLConfig:
    """GRPO settings (the book's defaults); bad values raise ValueError naming the field and its allowed range."""
    seed: Seed = 0  # seeds torch's global RNG and the training generator (task draws, sampling, minibatches)
    lr: Positive = dataclasses.field(default_factory=lambda: active().rl_lr)  # Adam learning rate (default: the rl_lr
    #   of the substrate in use, so the book's bare RLConfig() gets the fitted value; runs and the calibration pass
    #   their substrate explicitly, with RLConfig.for_substrate)
    epochs: Annotated[int, Field(ge=1)] = 1  # passes over each step's batch
    minibatches: Annotated[int, Field(ge=1)] = 2  # minibatches per pass (one optimizer step each)
    temperature: Temperature = 1.0  # sampling temperature; training log-probs use logits / temperature too
    kl_coef: NonNegative = 0.0  # weight of the KL-to-reference term in the loss (0 = off)
    kl_kind: Annotated[str, AfterValidator(_known_kl_kind)] = 'k3'  # KL estimator: 'k1', 'k2', 'k3' (rl_update) or
    #   chapter 10's 'k1+', 'k3+'
    clip_low: Annotated[float, Field(gt=0, lt=1), all_errors_say('a finite number in (0, 1)')] = 0.2  # PPO clip
    #   below: ratio >= 1 - clip_low counts
    clip_high: Positive = 0.2  # PPO clip above: ratio <= 1 + clip_high counts
    max_grad_norm: Positive = 1.0  # gradient clipping by global norm
    group_size: Annotated[int, Field(ge=2)] = 8  # episodes per task (one GRPO group)
    tasks_per_step: Annotated[int, Field(ge=1)] = 8  # tasks drawn per step (8 x 8 = 64 episodes)
    max_redraws: Annotated[int, Field(ge=0)] = 3  # extra task draws when no group of a step has a reward spread
    max_turns: Annotated[int, Field(ge=1)] = 6  # tool calls per episode before the episode is cut
    max_call_words: Optional[Annotated[int, Field(ge=2)]] = None  # words per tool call including ';' (None: the
    #   grammar's limit, 6 for the short)
    eval_every: Annotated[int, Field(ge=0)] = 20  # held-out evaluation after every this many steps (0 = never)
    eval_group_size: Annotated[int, Field(ge=1)] = 16  # attempts per held-out task in that evaluation
    eval_seed: Seed = 0  # seed of the evaluation's own generator (the training streams are not touched)
    turn_cost: NonNegative = dataclasses.field(default_factory=lambda: active().turn_cost)  # advantage units per turn
    #   above the group's mean, in groups with a reward spread (default: as lr, the substrate in use; 0 is the
    #   chapter's group-normalised GRPO)
    loss_agg: Literal[AGGREGATIONS] = 'token-mean'  # how per-token terms (surrogate, KL, entropy) become one number
    #   per minibatch: agentrl.core.aggregation's modes (verl's loss_agg_mode); 'token-mean' is the book's masked mean
    loss_agg_horizon: Optional[Positive] = None  # the fixed length 'seq-mean-token-sum-norm' divides by (Dr. GRPO's
    #   generation budget); required by that mode, refused by the others
    sample_temperature: Optional[Temperature] = None  # the rollouts' sampling temperature when the sampler is not
    #   the trainer (an inference engine drawing at another temperature); None: cfg.temperature, one policy

    def __post_init__(self):
        wants_horizon = self.loss_agg == 'seq-mean-token-sum-norm'
        if wants_horizon != (self.loss_agg_horizon is not None):
            raise ValueError(f'loss_agg_horizon={self.loss_agg_horizon!r} with loss_agg={self.loss_agg!r}: the '
                             "horizon is required by 'seq-mean-token-sum-norm' and means nothing to the other modes")

    @classmethod
    def for_substrate(cls, substrate, **fields):
        """The settings of a run on `substrate` (a SubstrateConfig): its fitted learning rate and cost per turn,
        then `fields`, which may set any field (those two included)."""
        return cls(**{'lr': substrate.rl_lr, 'turn_cost': substrate.turn_cost, **fields})


class NonFiniteLossError(FloatingPointError):
    """The loss became NaN or infinite; the model was not updated with it."""


class Plugin:
    """A term that joins the GRPO engine. Every hook does nothing here; a plug-in overrides the ones it needs.

    Hooks are called in this order on each step: shape_rewards, before_update, [prepare, then per minibatch
    begin_minibatch, reshape_surrogate and extend_loss], after_update, end_step. None of them may draw from the
    training random streams (torch's global RNG or the training generator).
    """
    acts_alone = False  # True: the engine updates even on a step where no group has a reward spread
    replaces_reference_kl = False  # True: this plug-in is the run's KL term (the engine adds no ReferenceKL)

    def begin(self, model, cfg):
        """Once, before the first step (e.g. freeze a copy of the starting policy)."""

    def shape_rewards(self, batch, record):
        """Change batch['rewards'] [B] in place before advantages are computed; log into record."""

    def before_update(self, model, batch, advantages, record):
        """Measure the policy before this step's update (must not touch the model)."""

    def prepare(self, ids, cfg, widths=None):
        """Once per update, without gradients, before the minibatches (e.g. reference log-probs of ids [B, T]);
        widths [B]: how many leading positions of each row the update reads (see read_widths)."""

    def begin_minibatch(self, rows, logits, logp, old_logp, mask):
        """Each minibatch's forward pass, before its loss: rows [b] index the update's batch; logits [b, T, V] and
        logp [b, T] carry gradients; old_logp [b, T] are the log-probs at the start of the update."""

    def reshape_surrogate(self, surrogate, logp, old_logp, advantages, mask, stats):
        """The per-token surrogate [b, T] to maximise (default: unchanged); may add entries to stats."""
        return surrogate

    def extend_loss(self, loss, rows, logits, logp, mask, stats):
        """The minibatch loss with this term added (default: unchanged); rows index the update's batch."""
        return loss

    def after_update(self, model, record):
        """Measure the policy after this step's update; log into record."""

    def end_step(self, record):
        """After the step is logged: e.g. a controller adjusting a coefficient for the next step."""


class ReferenceKL(Plugin):
    """KL to a frozen reference policy in the loss: + coef * the per-token estimator(logp, ref_logp, kind),
    reduced over the minibatch as cfg.loss_agg says (the book's masked mean by default).

    Chapter 9 uses it with kl_penalty (k1, k2, k3); chapter 10 passes kl_estimate for its '+' kinds. weighting
    'ratio' or 'ratio-detached' multiplies each token's estimate by pi / pi_old (ratio_weighted_kl), for tokens
    drawn by the policy at the start of the update rather than by the one being differentiated.
    """
    acts_alone = True  # the KL pulls towards the reference even when the rewards carry no signal
    replaces_reference_kl = True

    def __init__(self, reference, coef, kind, estimator=kl_penalty, weighting='none'):
        if weighting not in KL_WEIGHTINGS:
            raise ValueError(f'unknown KL weighting {weighting!r}; allowed: {", ".join(map(repr, KL_WEIGHTINGS))}')
        self.reference, self.coef, self.kind, self.estimator = reference, coef, kind, estimator
        self.weighting = weighting
        self.ref_logp = self.cfg = self.old_logp = None

    def begin(self, model, cfg):
        if self.reference is None:
            self.reference = copy.deepcopy(model).eval()  # the starting policy, frozen

    def prepare(self, ids, cfg, widths=None):
        self.cfg = cfg
        logits = self.reference(ids, widths)[:, :-1] / cfg.temperature  # [B, T-1, V]
        self.ref_logp = selected_log_probs(logits, ids[:, 1:])  # [B, T-1]

    def begin_minibatch(self, rows, logits, logp, old_logp, mask):
        self.old_logp = old_logp

    def extend_loss(self, loss, rows, logits, logp, mask, stats):
        ref_logp = self.ref_logp[rows]  # [b, T-1]
        if self.weighting == 'none':
            per_token = self.estimator(logp, ref_logp, self.kind)  # [b, T-1]
        else:
            per_token = ratio_weighted_kl(logp, ref_logp, self.old_logp, self.kind, self.weighting, self.estimator)
        kl = token_reduce(per_token, mask, self.cfg)
        stats['kl_ref'] = kl.item()
        return loss + self.coef * kl


def compute_advantages(batch, cfg):
    """GRPO advantages [B]: each reward minus its group's mean, over the group's std; 0 for groups of equal rewards.

    Groups are cfg.group_size contiguous rows of batch['rewards'] [B]. With cfg.turn_cost > 0, an episode of a
    group whose rewards differ also pays cfg.turn_cost per turn above its group's mean (batch['n_turns'] [B]),
    and gains as much per turn below it: a read costs a turn, so it has to earn its keep.
    """
    rewards = batch['rewards']
    if len(rewards) % cfg.group_size:
        raise ValueError(f'{len(rewards)} rewards do not split into groups of group_size={cfg.group_size}')
    if len(rewards) == 0:
        return rewards.clone()
    grouped = rewards.view(-1, cfg.group_size)  # [G, group_size]
    centered = grouped - grouped.mean(dim=1, keepdim=True)
    advantages = centered / (grouped.std(dim=1, keepdim=True) + 1e-6)  # [G, group_size]
    if cfg.turn_cost:
        if 'n_turns' not in batch:
            raise ValueError("cfg.turn_cost > 0 needs batch['n_turns'] (turns per episode [B]; collate sets it)")
        turns = batch['n_turns'].to(rewards.dtype).view(-1, cfg.group_size)  # [G, group_size]
        spread = (grouped != grouped[:, :1]).any(dim=1, keepdim=True)  # [G, 1]: the group carries a reward signal
        advantages = advantages - spread * cfg.turn_cost * (turns - turns.mean(dim=1, keepdim=True))
    return advantages.view(-1)  # [B]


def clipped_sides(ratio, advantages, cfg):
    """The tokens whose gradient PPO's clip removes, as two bool [B, T] masks (ratio [B, T], advantages [B]):
    pushed up past 1 + cfg.clip_high with A > 0, and pushed down past 1 - cfg.clip_low with A < 0."""
    adv = advantages[:, None]  # [B, 1]
    return (ratio > 1 + cfg.clip_high) & (adv > 0), (ratio < 1 - cfg.clip_low) & (adv < 0)


def token_reduce(values, mask, cfg):
    """A per-token loss term [b, T] reduced to one number as cfg.loss_agg says (masked_mean for 'token-mean'; also
    when cfg is None, for a plug-in called outside an update)."""
    if cfg is None or cfg.loss_agg == 'token-mean':  # the book's masked mean, computed as the book computes it
        return masked_mean(values, mask)
    return aggregate(values, mask, cfg.loss_agg, cfg.loss_agg_horizon)


def policy_loss(logp, old_logp, advantages, mask, cfg, plugins=()):
    """PPO clipped surrogate: logp, old_logp, mask [B, T], advantages [B] -> (scalar loss, dict of float stats).

    ratio = exp(logp - old_logp) counts inside [1 - cfg.clip_low, 1 + cfg.clip_high]; the loss is
    -min(ratio * A, clip(ratio) * A) after each plug-in's reshape_surrogate, reduced over policy tokens by
    token_reduce (the masked mean unless cfg.loss_agg says otherwise). clip_frac is the share of policy
    tokens whose gradient the clip removes (A > 0 above the range, A < 0 below it).
    """
    check_same_shape('logp', logp, 'old_logp', old_logp)
    check_same_shape('logp', logp, 'mask', mask)
    ratio = torch.exp(logp - old_logp)  # [B, T]
    surrogate = clipped_objective(ratio, advantages[:, None], cfg.clip_low, cfg.clip_high)  # [B, T]
    stats = {}
    for plugin in plugins:
        surrogate = plugin.reshape_surrogate(surrogate, logp, old_logp, advantages, mask, stats)
    loss = -token_reduce(surrogate, mask, cfg)
    with torch.no_grad():
        too_high, too_low = clipped_sides(ratio, advantages, cfg)
        stats = dict(pg_loss=loss.item(),
                     clip_frac=masked_mean((too_high | too_low).float(), mask).item(),
                     clip_high_frac=masked_mean(too_high.float(), mask).item(),
                     clip_low_frac=masked_mean(too_low.float(), mask).item(),
                     ratio=masked_mean(ratio, mask).item(),
                     approx_kl_old=masked_mean(torch.expm1(old_logp - logp) - (old_logp - logp), mask).item(),
                     **stats)
    return loss, stats


def chapter9_kl_kind(kind):
    """kind if chapter 9's kl_penalty takes it, else a ValueError pointing to chapter 10's estimators."""
    if kind not in KL_KINDS:
        raise ValueError(f"chapter 9's KL term uses kl_penalty, which takes {', '.join(KL_KINDS)}; got kl_kind="
                         f"{kind!r} (the '+' kinds are chapter 10's kl_estimate: use train_regularized)")
    return kind


def read_widths(mask):
    """action_mask [B, T-1] -> [B]: the leading positions of each row that anything reads, up to its last policy
    token's (at least 1). The logits at position p score token p + 1, so a policy token at p + 1 needs 0..p."""
    positions = torch.arange(1, mask.shape[1] + 1)  # [T-1]
    return (mask.bool() * positions).amax(dim=1).clamp(min=1) if mask.shape[0] else positions[:0]


def rl_update(model, optimizer, batch, advantages, cfg, ref_model=None, generator=None, plugins=None):
    """One GRPO update on a batch: cfg.epochs x cfg.minibatches clipped-surrogate steps -> averaged stats.

    old_logp is recomputed with the model; log-probs use logits / cfg.temperature. Without `plugins`,
    chapter 9's KL to ref_model (kl_penalty(cfg.kl_kind), masked mean) joins the loss when ref_model is
    given and cfg.kl_coef > 0; with `plugins`, exactly those terms join it. 'entropy' is the full-vocabulary
    entropy over policy tokens of each minibatch before its step. A NaN or infinite loss raises
    NonFiniteLossError before any weight changes.
    """
    if plugins is None:  # chapter 9's own KL term, when a reference is given and switched on
        use_kl = ref_model is not None and cfg.kl_coef
        plugins = [ReferenceKL(ref_model, cfg.kl_coef, chapter9_kl_kind(cfg.kl_kind))] if use_kl else []
    plugins = list(plugins)
    ids, mask = batch['ids'], batch['action_mask']  # [B, T], [B, T-1]
    # Causal attention lets a row stop at its last policy token: the padding after it is never computed
    widths = read_widths(mask)  # [B]
    with torch.no_grad():
        old_logp = selected_log_probs(model(ids, widths)[:, :-1] / cfg.temperature, ids[:, 1:])  # [B, T-1]
        for plugin in plugins:
            plugin.prepare(ids, cfg, widths)
    per_minibatch = []
    for _ in range(cfg.epochs):
        for rows in torch.randperm(len(ids), generator=generator).chunk(cfg.minibatches):
            logits = model(ids[rows], widths[rows])[:, :-1] / cfg.temperature  # [b, T-1, V]
            logp = selected_log_probs(logits, ids[rows, 1:])  # [b, T-1]
            for plugin in plugins:
                plugin.begin_minibatch(rows, logits, logp, old_logp[rows], mask[rows])
            loss, stats = policy_loss(logp, old_logp[rows], advantages[rows], mask[rows], cfg, plugins)
            for plugin in plugins:
                loss = plugin.extend_loss(loss, rows, logits, logp, mask[rows], stats)
            if 'entropy' not in stats:  # a plug-in that uses the entropy logs it; otherwise measure it here
                with torch.no_grad():
                    stats['entropy'] = masked_mean(entropy_from_logits(logits), mask[rows]).item()
            if not torch.isfinite(loss):
                raise NonFiniteLossError(f'the loss is {loss.item()}; the model was not updated')
            optimizer.zero_grad()
            loss.backward()
            stats['grad_norm'] = float(torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm))
            if not math.isfinite(stats['grad_norm']):
                raise NonFiniteLossError(f'the gradient norm is {stats["grad_norm"]} (the loss {loss.item()} is finite); '
                                         'the model was not updated')
            optimizer.step()
            per_minibatch.append(stats)
    return {key: sum(s[key] for s in per_minibatch) / len(per_minibatch) for key in per_minibatch[0]}


def skipped_update(model, batch, cfg):
    """The stats of a step that makes no update: the batch's policy-token entropy (as rl_update logs it), grad_norm 0."""
    with torch.no_grad():
        logits = model(batch['ids'], read_widths(batch['action_mask']))[:, :-1] / cfg.temperature  # [B, T-1, V]
        return dict(entropy=masked_mean(entropy_from_logits(logits), batch['action_mask']).item(), grad_norm=0.0)


def heldout_pass_at_1(model, tok, cfg, tasks=None, attempts=None, seed=None):
    """Mean over held-out tasks of the share of `attempts` episodes (default cfg.eval_group_size) that pass.

    Samples at cfg.temperature with its own generator seeded `seed` (default cfg.eval_seed); it does not
    touch the model, torch's global RNG or any training generator.
    """
    tasks = make_tasks('heldout') if tasks is None else tasks
    eval_cfg = dataclasses.replace(cfg, group_size=attempts or cfg.eval_group_size)
    generator = torch.Generator().manual_seed(cfg.eval_seed if seed is None else seed)
    trajs = sample_groups(model, lambda: make_env(eval_cfg), tasks, tok, eval_cfg, generator)
    return sum(t.reward for t in trajs) / len(trajs)


def engine_plugins(cfg, plugins=()):
    """The plug-ins train_rl runs, in its order: `plugins`, then chapter 9's KL term (ReferenceKL with kl_penalty) when
    cfg.kl_coef > 0 and none of them is the run's KL term."""
    chosen = list(plugins)
    if cfg.kl_coef and not any(p.replaces_reference_kl for p in chosen):
        chosen.append(ReferenceKL(None, cfg.kl_coef, chapter9_kl_kind(cfg.kl_kind)))
    return chosen


def sampler_config(cfg):
    """The settings the rollouts are drawn with: cfg itself, or cfg at cfg.sample_temperature when that is set."""
    if cfg.sample_temperature is None:
        return cfg
    return dataclasses.replace(cfg, temperature=cfg.sample_temperature, sample_temperature=None)


class EpisodeRollout:
    """TinyAgent's side of the loop: groups of gym episodes on `tasks`, their behaviour stats, the collated batch, and
    held-out pass@1 every cfg.eval_every steps (on eval_tasks, default make_tasks('heldout'))."""

    def __init__(self, tasks, tok, cfg, eval_tasks=None):
        self.tasks, self.tok, self.cfg, self.eval_tasks = tasks, tok, cfg, eval_tasks

    def sample_step(self, model, sampler, generator):
        return sample_step(model, lambda: make_env(self.cfg), self.tasks, self.tok, sampler, generator)

    def stats(self, sampled):
        return behavior_stats(sampled)

    def collate(self, groups):
        return collate(groups, self.tok.pad_id)

    def after_update(self, model, step, record):
        if self.cfg.eval_every and (step + 1) % self.cfg.eval_every == 0:
            record['heldout_pass1'] = heldout_pass_at_1(model, self.tok, self.cfg, self.eval_tasks)


def run_grpo(model, rollout, cfg, steps, plugins=(), label='GRPO', threads=TRAIN_THREADS, on_step=None):
    """GRPO for `steps` steps on what `rollout` samples -> history (one dict of stats per step).

    Per step: the rollout samples cfg.tasks_per_step groups of cfg.group_size (at cfg.sample_temperature when it is
    set: a sampler that is not the trainer) and measures them, plug-ins shape the rewards, group advantages are
    computed, the model is updated (rl_update) and the rollout may add to the record (held-out scores). Chapter 9's
    KL term is added when cfg.kl_coef > 0 unless a plug-in is the run's KL term. A step where no group has a reward
    spread (even after the rollout's redraws) updates on the whole draw (advantages all 0) only if some plug-in acts
    alone, and makes no optimizer step otherwise ('signal' 0 in its record). A NaN or infinite loss stops training
    with NonFiniteLossError naming `label` and the step, before the weights change. Torch runs on `threads` threads
    meanwhile. on_step(step, record, model, optimizer), when given, is called after each step (a checkpoint).

    A rollout answers sample_step(model, sampler, generator) -> (kept groups, sampled groups), stats(sampled) -> dict,
    collate(groups) -> the engine's batch (ids, action_mask, rewards, ...), after_update(model, step, record).
    """
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
        raise ValueError(f'steps must be an int >= 0, got {steps!r}')
    plugins = engine_plugins(cfg, plugins)
    sampler = sampler_config(cfg)
    with fixed_threads(threads):
        torch.manual_seed(cfg.seed)
        gen = torch.Generator().manual_seed(cfg.seed)  # task draws, sampling, minibatch order: one stream
        for plugin in plugins:
            plugin.begin(model, cfg)
        optimizer = adam(model.parameters(), lr=cfg.lr)
        acts_alone = any(p.acts_alone for p in plugins)
        history = []
        for step in progress(range(steps), desc=label):
            kept, sampled = rollout.sample_step(model, sampler, gen)
            record = dict(step=step, **rollout.stats(sampled))
            record['signal'] = float(bool(kept))  # 0: no group had a reward spread
            batch = rollout.collate(kept or sampled)
            for plugin in plugins:
                plugin.shape_rewards(batch, record)
            advantages = compute_advantages(batch, cfg)
            for plugin in plugins:
                plugin.before_update(model, batch, advantages, record)
            try:
                if kept or acts_alone:
                    record.update(rl_update(model, optimizer, batch, advantages, cfg, generator=gen, plugins=plugins))
                else:  # nothing to learn from: no step (an Adam step on a zero gradient would still move the weights)
                    record.update(skipped_update(model, batch, cfg))
            except NonFiniteLossError as error:
                raise NonFiniteLossError(f'{label}, step {step}: {error}') from error
            for plugin in plugins:
                plugin.after_update(model, record)
            rollout.after_update(model, step, record)
            for plugin in plugins:
                plugin.end_step(record)
            history.append(record)
            if on_step is not None:
                on_step(step, record, model, optimizer)
    return history


def train_rl(model, tasks, tok, cfg, steps, eval_tasks=None, plugins=(), label='GRPO'):
    """GRPO on TinyAgent's gym (run_grpo with an EpisodeRollout on `tasks`) -> history (one dict of stats per step).

    Every cfg.eval_every steps the record gets held-out pass@1 ('heldout_pass1', on eval_tasks, default
    make_tasks('heldout')) from its own generator. Torch runs on TRAIN_THREADS threads meanwhile.
    """
    return run_grpo(model, EpisodeRollout(tasks, tok, cfg, eval_tasks), cfg, steps, plugins, label)
