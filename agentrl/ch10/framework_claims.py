"""The frameworks' options as settings of section 10.7's comparison, and what their papers lead us to expect of them.

Each option is one RunSpec beside the chapter's own settings ('none', 'KL k3 0.3', 'KL k3+ 0.3'), on the same seeds,
40 steps, from the same RL base. Each claim below was written before any of these runs existed; a claim is checked on
every seed and judged by the chapter's rule (claims.seed_rule: true on more than half the seeds). The checks
read run summaries (summary), so a committed record of the sweep can be judged again without the runs.
"""
import dataclasses
import json
from pathlib import Path

from agentrl.ch10 import across, claims, experiments, ties
from agentrl.ch10.claims import Bound, Claim, Gap, entropy_apart, entropy_end, late_mean, metric
from agentrl.paths import FRAMEWORK_SWEEP
from agentrl.substrate.config import active
from agentrl.substrate.gym import Env
from agentrl.substrate.grpo import RLConfig

OPTION = 'option'  # a claim about what a framework option does, from its paper or its own reasoning
SAMPLER_TEMPERATURE = 1.3  # the sampler made to differ: it draws at this temperature, the trainer learns at 1.0
ENTROPY_TARGETS = (0.3, 0.15)  # two targets below the RL base's entropy (about 0.45 at the start of training)
ENTROPY_STEP, ENTROPY_MAX = 0.01, 0.5  # the controller's step per training step and its ceiling
BASELINES = ('none', 'KL k3 0.3', 'KL k3+ 0.3')  # the chapter's settings the options are set against
HISTORY_KEYS = ('step', 'entropy', 'reward', 'policy_tokens', 'kl_ref', 'ratio', 'clip_frac', 'entropy_coef',
                'sampler_kl', 'sampler_weight', 'seq_clip_frac', 'capped_frac', 'top_entropy_frac')
AGREE = 0.05  # final entropies closer than this agree (the chapter's own threshold for its estimators)


def horizon(cfg=None):
    """The most policy tokens an episode can hold: max_turns calls of the grammar's longest call (Dr. GRPO's fixed
    length for 'seq-mean-token-sum-norm')."""
    cfg = cfg or RLConfig.for_substrate(active())
    return cfg.max_turns * Env(max_turns=cfg.max_turns, max_call_words=cfg.max_call_words).max_call_words


def option_arms(seed=0, steps=40):
    """The frameworks' options as settings, in the notebook's order -> [RunSpec]."""
    kl3 = dict(kl_coef=0.3, kl_kind='k3')
    kl3p = dict(kl_coef=0.3, kl_kind='k3+')
    arm = lambda name, **kw: experiments.arm(name, steps=steps, seed=seed, **kw)
    sampler = dict(sample_temperature=SAMPLER_TEMPERATURE)
    return [
        arm('KL k3 0.3, ratio-weighted', fields=kl3, kl_weighting='ratio'),
        arm('KL k3+ 0.3, seq-mean-token-mean', fields=dict(kl3p, loss_agg='seq-mean-token-mean')),
        arm('KL k3+ 0.3, seq-mean-token-sum', fields=dict(kl3p, loss_agg='seq-mean-token-sum')),
        arm('KL k3+ 0.3, seq-mean-token-sum-norm',
            fields=dict(kl3p, loss_agg='seq-mean-token-sum-norm', loss_agg_horizon=float(horizon()))),
        *[arm(f'entropy target {target}', options=dict(entropy_target=target, entropy_step=ENTROPY_STEP,
                                                       entropy_max=ENTROPY_MAX)) for target in ENTROPY_TARGETS],
        arm('top 20% entropy', options=dict(top_entropy=0.2)),
        arm('GSPO', fields=dict(loss_agg='seq-mean-token-mean'),
            options=dict(surrogate='gspo', surrogate_clip=(3e-4, 4e-4))),
        arm('CISPO', options=dict(surrogate='cispo', surrogate_clip=(1.0, 0.2))),
        arm(f'sampler T={SAMPLER_TEMPERATURE}, uncorrected', fields=sampler,
            options=dict(sampler_correction='measure')),
        arm(f'sampler T={SAMPLER_TEMPERATURE}, token_truncate 2', fields=sampler,
            options=dict(sampler_correction='token_truncate', sampler_threshold=2.0)),
        arm(f'sampler T={SAMPLER_TEMPERATURE}, sequence_mask 2', fields=sampler,
            options=dict(sampler_correction='sequence_mask', sampler_threshold=2.0)),
    ]


def sweep_arms(seed=0, steps=40):
    """The chapter's baselines (exactly as section 10.7 runs them, so their runs are shared) and the options."""
    chapter = {spec.name: spec for spec in experiments.chapter_arms(steps=steps, seed=seed)}
    return [chapter[name] for name in BASELINES] + option_arms(seed, steps)


def sweep_specs(seeds, steps=40, arms_of=sweep_arms):
    """arms_of(seed, steps) (sweep_arms) of every seed, each renamed '<name> | seed <s>' as across.seed_specs names
    them, so that one sweep holds them all (across.runs_of_seed takes one seed's back out)."""
    return [dataclasses.replace(spec, name=f'{spec.name} | seed {seed}')
            for seed in seeds for spec in arms_of(seed, steps)]


def load_record(path=None):
    """The committed record of make framework-sweep (results/framework_sweep.json), or a FileNotFoundError saying how to
    make it."""
    path = Path(path or FRAMEWORK_SWEEP)
    if not path.is_file():
        raise FileNotFoundError(f'{path} is missing: run make framework-sweep')
    return json.loads(path.read_text())


def summary(run):
    """What the claims and the notebook read of a run: across.run_summary with this sweep's HISTORY_KEYS (the held-out
    metrics are the same)."""
    return across.run_summary(run, history_keys=HISTORY_KEYS)


def run_mean(run, key):
    """Mean of a logged quantity over the steps that logged it."""
    values = [step[key] for step in run['history'] if key in step]
    return sum(values) / len(values)


# ------------------------------------------------------------------ the checks (each: runs -> (held, evidence))

def _agrees(name, base):
    def check(runs):
        a, b = entropy_end(runs[name]), entropy_end(runs[base])
        return abs(a - b) < AGREE, f'final entropy {a:.3f} vs {b:.3f} ({base})'
    return check


AGGREGATED = tuple(f'KL k3+ 0.3, {mode}' for mode in ('seq-mean-token-mean', 'seq-mean-token-sum',
                                                       'seq-mean-token-sum-norm'))


def _modes_agree(runs):
    base = entropy_end(runs['KL k3+ 0.3'])
    ends = {name.split(', ')[1]: entropy_end(runs[name]) for name in AGGREGATED}
    spread = max(abs(v - base) for v in ends.values())
    return spread < AGREE, (', '.join(f'{k} {v:.3f}' for k, v in ends.items()) +
                            f' vs token-mean {base:.3f} (largest gap {spread:.3f})')


def _length_bias(runs):
    per_seq = late_mean(runs[AGGREGATED[0]], 'policy_tokens')
    fixed = late_mean(runs[AGGREGATED[2]], 'policy_tokens')
    return per_seq > fixed, (f'policy tokens per episode over the last 5 steps: seq-mean-token-mean {per_seq:.2f} vs '
                             f'seq-mean-token-sum-norm {fixed:.2f}')


def _closer_to_target(target):
    def check(runs):
        end, base = entropy_end(runs[f'entropy target {target}']), entropy_end(runs['none'])
        return abs(end - target) < abs(base - target), (f'final entropy {end:.3f} vs none {base:.3f}, target '
                                                        f'{target}')
    return check


def _targets_ordered(runs):
    high, low = (entropy_end(runs[f'entropy target {t}']) for t in ENTROPY_TARGETS)
    return low < high, (f'final entropy target {ENTROPY_TARGETS[1]}: {low:.3f}, target {ENTROPY_TARGETS[0]}: '
                        f'{high:.3f}')


def _entropy_above_none(name):
    def check(runs):
        a, b = entropy_end(runs[name]), entropy_end(runs['none'])
        return a > b, f'final entropy {a:.3f} vs none {b:.3f}'
    return check


def _pass1_at_least_none(name):
    def check(runs):
        a, b = metric(runs[name], 'pass1'), metric(runs['none'], 'pass1')
        return a >= b, f'pass@1 {a:.3f} vs none {b:.3f}'
    return check


def _gspo_clips_sequences(runs):
    share = run_mean(runs['GSPO'], 'seq_clip_frac')
    return share > 0, f'share of sequences the sequence clip silences, mean over minibatches {share:.3f}'


UNCORRECTED = f'sampler T={SAMPLER_TEMPERATURE}, uncorrected'


def _sampler_differs(runs):
    gap = run_mean(runs[UNCORRECTED], 'sampler_kl')
    return gap > 0.01, f'KL(sampler || trainer) per policy token, mean over minibatches {gap:.3f}'


def _correction_closer(name):
    def check(runs):
        truth = entropy_end(runs['none'])
        fixed, left = entropy_end(runs[name]), entropy_end(runs[UNCORRECTED])
        return abs(fixed - truth) < abs(left - truth), (f'final entropy {fixed:.3f}, uncorrected {left:.3f}, '
                                                        f'on-policy none {truth:.3f}')
    return check


def _above_none(what, name):
    """The gap a claim that `name` is above the unregularised run on `what` rests on; a pass@1 'loses no' claim is
    judged the same way, so a gap inside the noise is tied, not a success."""
    return (Gap(what, name, ties.HIGHER, 'none'),)



# The thresholds the checks above compare against, each read per seed so that a draw within one draw's noise of its
# threshold is tied (claims.Bound); a comparison of two distances reads their difference against 0.
def _widest_mode_gap(runs):
    base = entropy_end(runs['KL k3+ 0.3'])
    return max(abs(entropy_end(runs[name]) - base) for name in AGGREGATED)


def _length_gap(runs):
    return late_mean(runs[AGGREGATED[0]], 'policy_tokens') - late_mean(runs[AGGREGATED[2]], 'policy_tokens')


def _nearer_target(target):
    def read(runs):
        end, base = entropy_end(runs[f'entropy target {target}']), entropy_end(runs['none'])
        return abs(end - target) - abs(base - target)
    return read


def _nearer_on_policy(name):
    def read(runs):
        truth = entropy_end(runs['none'])
        return abs(entropy_end(runs[name]) - truth) - abs(entropy_end(runs[UNCORRECTED]) - truth)
    return read


CLAIMS = [
    Claim('ratio-kl-small', OPTION, 'at one epoch of two minibatches, weighting the k3 term by pi / pi_old (DeepSeek-'
          'V3.2) changes little: the final entropy agrees with the unweighted KL k3 0.3 within 0.05',
          ('KL k3 0.3, ratio-weighted', 'KL k3 0.3'), _agrees('KL k3 0.3, ratio-weighted', 'KL k3 0.3'),
          bounds=(Bound('final entropy apart', entropy_apart('KL k3 0.3, ratio-weighted', 'KL k3 0.3'), ties.LOWER,
                        AGREE),)),
    Claim('aggregation-keeps-balance', OPTION, 'with every term aggregated the same way the KL weighs the same against '
          'the policy term in each sequence, so all four modes end within 0.05 of one another\'s final entropy (each '
          'within 0.05 of token-mean)', ('KL k3+ 0.3', *AGGREGATED), _modes_agree,
          bounds=(Bound('largest final-entropy gap to token-mean', _widest_mode_gap, ties.LOWER, AGREE),)),
    Claim('per-sequence-mean-lengthens', OPTION, 'dividing each sequence by its own length favours long episodes (Dr. '
          'GRPO): seq-mean-token-mean ends with more policy tokens per episode than the fixed-length '
          'seq-mean-token-sum-norm', AGGREGATED[::2], _length_bias,
          bounds=(Bound('policy tokens per episode, per-sequence mean less fixed length', _length_gap, ties.HIGHER,
                        0.0),)),
    *[Claim(f'target-{target}-steers', OPTION, f'the entropy controller (Skywork-OR1) ends nearer its target {target} '
            'than the unregularised run does', (f'entropy target {target}', 'none'), _closer_to_target(target),
            bounds=(Bound('distance to the target, less the unregularised run\'s', _nearer_target(target), ties.LOWER,
                          0.0),))
      for target in ENTROPY_TARGETS],
    Claim('targets-ordered', OPTION, f'the lower target ({ENTROPY_TARGETS[1]}) ends with a lower entropy than the '
          f'higher ({ENTROPY_TARGETS[0]})', tuple(f'entropy target {t}' for t in ENTROPY_TARGETS), _targets_ordered,
          (Gap('final entropy', f'entropy target {ENTROPY_TARGETS[1]}', ties.LOWER,
               f'entropy target {ENTROPY_TARGETS[0]}'),)),
    Claim('top-entropy-keeps-entropy', OPTION, 'updating only the top 20% entropy tokens ends with a higher entropy '
          'than updating all of them (the 80/20 paper)', ('top 20% entropy', 'none'),
          _entropy_above_none('top 20% entropy'), _above_none('final entropy', 'top 20% entropy')),
    Claim('top-entropy-matches', OPTION, 'updating only the top 20% entropy tokens loses no held-out pass@1 against '
          'updating all of them (the 80/20 paper)', ('top 20% entropy', 'none'), _pass1_at_least_none('top 20% entropy'),
          _above_none('pass@1', 'top 20% entropy')),
    Claim('gspo-clips-sequences', OPTION, 'GSPO\'s clip on the sequence ratio (3e-4, 4e-4) silences whole sequences',
          ('GSPO',), _gspo_clips_sequences,
          bounds=(Bound('share of sequences silenced', lambda runs: run_mean(runs['GSPO'], 'seq_clip_frac'),
                        ties.HIGHER, 0.0),)),
    Claim('gspo-matches', OPTION, 'GSPO loses no held-out pass@1 against the token-level PPO objective', ('GSPO', 'none'),
          _pass1_at_least_none('GSPO'), _above_none('pass@1', 'GSPO')),
    Claim('cispo-keeps-entropy', OPTION, 'CISPO, which keeps a capped gradient on every token, ends with a higher '
          'entropy than PPO\'s clip, which silences tokens (MiniMax-M1)', ('CISPO', 'none'),
          _entropy_above_none('CISPO'), _above_none('final entropy', 'CISPO')),
    Claim('sampler-differs', OPTION, f'a sampler at temperature {SAMPLER_TEMPERATURE} differs from the trainer at 1.0 '
          'by more than 0.01 nats per policy token', (UNCORRECTED,), _sampler_differs,
          bounds=(Bound('KL(sampler || trainer) per policy token',
                        lambda runs: run_mean(runs[UNCORRECTED], 'sampler_kl'), ties.HIGHER, 0.01),)),
    *[Claim(f'{mode}-corrects', OPTION, f'{mode} weights bring the final entropy nearer the on-policy run than '
            'leaving the sampler uncorrected', (f'sampler T={SAMPLER_TEMPERATURE}, {mode} 2', UNCORRECTED, 'none'),
            _correction_closer(f'sampler T={SAMPLER_TEMPERATURE}, {mode} 2'),
            bounds=(Bound('distance to the on-policy run, less the uncorrected run\'s',
                          _nearer_on_policy(f'sampler T={SAMPLER_TEMPERATURE}, {mode} 2'), ties.LOWER, 0.0),))
      for mode in ('token_truncate', 'sequence_mask')],
]


def option_verdicts(runs_by_seed, seeds):
    """Every claim judged on the seeds' runs (or summaries) by claims.seed_verdict -> [dict], in CLAIMS order."""
    if len(runs_by_seed) != len(seeds):
        raise ValueError(f'runs_by_seed has {len(runs_by_seed)} entries for {len(seeds)} seeds')
    found = [claims.seed_verdict(claim, runs_by_seed, seeds) for claim in CLAIMS]
    return [verdict for verdict in found if verdict is not None]
