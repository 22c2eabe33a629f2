"""Section 10.6's clip-higher batch, measured on the chapter's batch and on nine more: the book's reading checked.

A batch is 64 episodes the RL base samples on the first 8 training tasks (8 attempts each), from a generator seeded
with the batch seed; the chapter's batch is seed 0. On it a copy of the RL base takes 8 full-batch clipped-surrogate
Adam steps (learning rate 1e-3) at each upper clip, and the entropy over the policy's tokens is measured after them.
The book's printed batch ends with the most entropy at the tightest clip (0.538 at 0.2 against 0.508 at 100); that
reading is a claim here, judged on the batch seeds by the rule every other claim uses (claims.seed_rule).
"""
import copy
import hashlib
import inspect
import json
import re

import torch

from agentrl import chapter
from agentrl.ch10 import ties
from agentrl.ch10.claims import DOES_NOT_HOLD, HOLDS, OBSERVATION, TIED, outcome_rule, seed_rule_counts
from agentrl.ch10.experiments import model_fingerprint
from agentrl.ch10.regularizers import entropy_bonus
from agentrl.core.logprobs import entropy_from_logits, selected_log_probs
from agentrl.fingerprint import code_fingerprint, kernel_choice, source_fingerprint
from agentrl.paths import cache_dir
from agentrl.substrate.config import active
from agentrl.substrate.grpo import RLConfig, compute_advantages, policy_loss
from agentrl.substrate.gym import make_env
from agentrl.substrate.rollout import collate, sample_groups
from agentrl.verified_cache import load_verified, save_verified

SETTINGS = (0.2, 0.28, 100.0)  # PPO's usual upper clip, DAPO's, and no upper bound in practice
BATCH_SEEDS = tuple(range(10))
UPDATES, LR, TASKS = 8, 1e-3, 8
RARE = 0.5  # a token is 'rare' when the RL base gave it probability below this
CLAIM_KEY = 'clip_higher_claim'  # where notebook 06 records the claim's verdict
CLAIM_TEXT = 'The tightest upper clip keeps the most entropy: after the 8 steps the entropy is highest at clip_high 0.2'
FORMAT = 1  # bump when the measurement's content changes


def sample_batch(rl_base, tok, tasks, seed):
    """The batch of one batch seed, with what the measurements read from it -> dict of tensors and counts."""
    cfg = RLConfig(seed=seed)
    episodes = sample_groups(rl_base, lambda: make_env(cfg), tasks[:TASKS], tok, cfg, torch.Generator().manual_seed(seed))
    batch = collate(episodes, tok.pad_id)
    tokens, on_policy = batch['ids'], batch['action_mask']  # [B, T], [B, T-1]
    adv = compute_advantages(batch, cfg)  # [B]
    with torch.no_grad():
        start_logits = rl_base(tokens)[:, :-1]  # [B, T-1, V]
        start_logp = selected_log_probs(start_logits, tokens[:, 1:])  # [B, T-1]
        start_entropy = entropy_bonus(start_logits, on_policy).item()
    rewarded = (adv[:, None] > 0) & (on_policy > 0)  # tokens the update pushes up
    penalised = (adv[:, None] < 0) & (on_policy > 0)  # tokens it pushes down
    return dict(tokens=tokens, on_policy=on_policy, adv=adv, start_logp=start_logp, start_entropy=start_entropy,
                rewarded=rewarded, rewarded_rare=rewarded & (start_logp.exp() < RARE), penalised=penalised,
                penalised_likely=penalised & (start_logp.exp() >= RARE), mean_reward=batch['rewards'].mean().item())


def push(rl_base, batch, clip_high, token_mask=None):
    """A copy of the RL base after UPDATES full-batch clipped-surrogate steps on the batch, the loss on token_mask's
    tokens (default: every policy token) -> (model, the last step's stats)."""
    tokens, start_logp, adv = batch['tokens'], batch['start_logp'], batch['adv']
    mask = batch['on_policy'] if token_mask is None else token_mask.float()
    policy, settings = copy.deepcopy(rl_base), RLConfig(clip_high=clip_high)
    adam = torch.optim.Adam(policy.parameters(), lr=LR, fused=True)  # as the engine's (agentrl.cpu.adam)
    for _ in range(UPDATES):
        new_logp = selected_log_probs(policy(tokens)[:, :-1], tokens[:, 1:])
        loss, stats = policy_loss(new_logp, start_logp, adv, mask, settings)
        adam.zero_grad()
        loss.backward()
        adam.step()
    return policy, stats


def end_entropy(policy, batch):
    """Entropy over all the batch's policy tokens under policy."""
    with torch.no_grad():
        return entropy_bonus(policy(batch['tokens'])[:, :-1], batch['on_policy']).item()


def clip_row(rl_base, batch, clip_high):
    """One printed row's numbers: start and end entropy, the rewarded tokens above the upper clip at the end (and how
    many of them were rare), the last step's clip fraction."""
    policy, last = push(rl_base, batch, clip_high)
    with torch.no_grad():
        end_logits = policy(batch['tokens'])[:, :-1]
        ratio = (selected_log_probs(end_logits, batch['tokens'][:, 1:]) - batch['start_logp']).exp()
        beyond = batch['rewarded'] & (ratio > 1 + clip_high)
        end = entropy_bonus(end_logits, batch['on_policy']).item()
    return dict(start=batch['start_entropy'], end=end, above=int(beyond.sum()),
                above_rare=int((beyond & batch['rewarded_rare']).sum()), last_clip_frac=last['clip_frac'])


def only_positive_end(rl_base, batch, clip_high):
    """The entropy after the steps when the loss sees only the rewarded tokens (the ones the upper clip acts on)."""
    return end_entropy(push(rl_base, batch, clip_high, batch['rewarded'])[0], batch)


def only_negative_end(rl_base, batch):
    """The entropy after the steps when the loss sees only the penalised tokens (no upper clip acts on them)."""
    return end_entropy(push(rl_base, batch, SETTINGS[0], batch['penalised'])[0], batch)


def measure_batch(rl_base, tok, tasks, seed):
    """Everything measured on one batch seed -> plain dict (rows and only_positive in SETTINGS order)."""
    batch = sample_batch(rl_base, tok, tasks, seed)
    return dict(seed=seed, rewarded=int(batch['rewarded'].sum()), rewarded_rare=int(batch['rewarded_rare'].sum()),
                rows=[dict(clip_high=c, **clip_row(rl_base, batch, c)) for c in SETTINGS],
                only_positive=[only_positive_end(rl_base, batch, c) for c in SETTINGS])


MEASURING = (sample_batch, push, end_entropy, clip_row, only_positive_end, measure_batch)  # what the cache depends on


def description(rl_base, seeds):
    """What determines the measurement: its settings, the code, the measuring functions, the RL base, torch and its kernels."""
    return dict(format=FORMAT, what='clip-higher on batch seeds', seeds=list(seeds), settings=list(SETTINGS),
                updates=UPDATES, lr=LR, tasks=TASKS, rare=RARE, code=code_fingerprint(),
                measuring=source_fingerprint('\n'.join(inspect.getsource(f) for f in MEASURING)), substrate=active().key(),
                rl_base=model_fingerprint(rl_base), torch=str(torch.__version__), kernels=kernel_choice())


def measure_batches(rl_base, tok, tasks, seeds=BATCH_SEEDS):
    """measure_batch on each seed -> [dict], cached on disk by description (about 8 s a seed when computed)."""
    described = description(rl_base, seeds)
    key = hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()[:20]
    path = cache_dir() / 'clip_higher' / f'batches-{key}.pt'
    found = load_verified(path, described, 'clip-higher measurement')
    if found is None:
        found = [measure_batch(rl_base, tok, tasks, seed) for seed in seeds]
        path.parent.mkdir(parents=True, exist_ok=True)
        save_verified(path, found, described)
    return found


def ends(measured, key='rows'):
    """{clip_high: [entropy after the steps on each batch]} for the whole batch (key 'rows') or the rewarded tokens
    only (key 'only_positive')."""
    pick = (lambda m, i: m['rows'][i]['end']) if key == 'rows' else (lambda m, i: m['only_positive'][i])
    return {c: [pick(m, i) for m in measured] for i, c in enumerate(SETTINGS)}


def tolerance(measured, key='rows', n_each=1):
    """ties.tolerance over the batch seeds for the entropy after the steps (key as in ends)."""
    return ties.tolerance(ends(measured, key), n_each)


def tightest_keeps_most(row_ends):
    """The claim on one batch: the entropy at the tightest clip is above every other setting's ({clip: end})."""
    tightest = min(row_ends)
    return all(row_ends[tightest] > e for c, e in row_ends.items() if c != tightest)


def tightest_outcome(row_ends, tol):
    """The claim on one batch under the tie rule: DOES_NOT_HOLD if another clip ends above the tightest by tol or
    more, TIED if none does but one is within tol of it, else HOLDS."""
    tightest = min(row_ends)
    words = [ties.compare(row_ends[tightest], e, tol) for c, e in row_ends.items() if c != tightest]
    if ties.LOWER in words:
        return DOES_NOT_HOLD
    return TIED if ties.TIED in words else HOLDS


def binds_on_rare(rows, rewarded, rare):
    """True when, at each clip that can bind (below 100), rare tokens make up more of the rewarded tokens above the
    clip than of all rewarded tokens. rows: {clip: dict(above, above_rare)}."""
    return all(rows[c]['above'] > 0 and rows[c]['above_rare'] / rows[c]['above'] > rare / max(rewarded, 1)
               for c in SETTINGS[:-1])


BOOK_ROW = re.compile(r'clip_high\s+([\d.]+) \| entropy ([\d.]+) -> ([\d.]+) \| last-step clip_frac ([\d.]+) \| '
                      r'A>0 tokens above the upper clip: (\d+), (\d+) of them')


def book_batch():
    """The book's printed clip-higher block -> (rewarded tokens, rare ones, {clip: row dict}), from
    data/book/chapter10.json."""
    lines = chapter.blocks_of('10.6')[2].lines
    rewarded, rare = map(int, re.match(r'(\d+) policy tokens with A > 0, (\d+) of them', lines[0]).groups())
    rows = {}
    for line in lines[1:]:
        c, begin, end, frac, above, above_rare = BOOK_ROW.match(line).groups()
        rows[float(c)] = dict(start=float(begin), end=float(end), last_clip_frac=float(frac), above=int(above),
                              above_rare=int(above_rare))
    return rewarded, rare, rows


def claim(measured):
    """The book's reading judged on the batch seeds -> plain dict for the record (CLAIM_KEY): per-seed outcomes under
    the tie rule (and `held`, each batch's bare check), outcome_rule's verdict, the book's ends, our mean ends and the tolerance for means over the seeds."""
    by_setting = ends(measured)
    held = [tightest_keeps_most({c: by_setting[c][k] for c in SETTINGS}) for k in range(len(measured))]
    tol = tolerance(measured)
    outcomes = [tightest_outcome({c: by_setting[c][k] for c in SETTINGS}, tol) for k in range(len(measured))]
    need, most = seed_rule_counts(len(held))
    n = len(measured)
    _, _, book = book_batch()
    return dict(key='clip_higher_tightest', kind=OBSERVATION, text=CLAIM_TEXT, seeds=[m['seed'] for m in measured],
                held=held, outcomes=outcomes, held_on=outcomes.count(HOLDS), tied_on=outcomes.count(TIED),
                verdict=outcome_rule(outcomes), holds_from=need, fails_up_to=most,
                book_end={f'{c:g}': book[c]['end'] for c in SETTINGS},
                mean_end={f'{c:g}': sum(v) / n for c, v in by_setting.items()},
                highest_on={f'{c:g}': sum(max(SETTINGS, key=lambda s: by_setting[s][k]) == c for k in range(n))
                            for c in SETTINGS},
                tolerance_one=tolerance(measured), tolerance_mean=tolerance(measured, n_each=n),
                tightest_above_loosest_on=sum(by_setting[SETTINGS[0]][k] > by_setting[SETTINGS[-1]][k] for k in range(n)),
                binds_on_rare_on=sum(binds_on_rare({r['clip_high']: r for r in m['rows']}, m['rewarded'],
                                                   m['rewarded_rare']) for m in measured))


def change(start, end):
    """'rises', 'falls' or 'stays level': the entropy's move as the printed three decimals show it."""
    a, b = round(start, 3), round(end, 3)
    return 'rises' if b > a else 'falls' if b < a else 'stays level'


def single_batch_checks(rows, rewarded, rare, book):
    """What one batch says about DAPO's two steps, set beside the book's batch (book: book_batch()) -> plain dict.
    Settings compared at full precision; clip_higher_ties gives the same comparisons under the tie rule."""
    ends = {c: r['end'] for c, r in rows.items()}
    book_rewarded, book_rare, book_rows = book
    book_ends = {c: r['end'] for c, r in book_rows.items()}
    start, book_start = rows[SETTINGS[0]]['start'], book_rows[SETTINGS[0]]['start']
    highest = max(ends, key=ends.get)
    return dict(rare_share_of_positive=rare / max(rewarded, 1), binds_on_rare=binds_on_rare(rows, rewarded, rare),
                book_binds_on_rare=binds_on_rare(book_rows, book_rewarded, book_rare),
                lowest_entropy_clip_high=min(ends, key=ends.get), highest_entropy_clip_high=highest,
                book_lowest_entropy_clip_high=min(book_ends, key=book_ends.get),
                loosest_clip_highest_entropy=highest == max(ends),
                direction_differs_from_book_at=[c for c in ends if change(start, ends[c]) != change(book_start, book_ends[c])])


def tie_checks(rows, only_positive, measured):
    """The single batch's comparisons under the tie rule: the tolerances from the batch seeds and the settings tied
    for the highest end, for the whole batch and for the rewarded tokens alone -> plain dict."""
    whole, positive = tolerance(measured), tolerance(measured, 'only_positive')
    ends = {c: r['end'] for c, r in rows.items()}
    return dict(batch_seeds=[m['seed'] for m in measured], z=ties.Z, tolerance_whole_batch=whole,
                tolerance_rewarded_only=positive, highest_whole_batch=ties.leaders(ends, whole),
                highest_rewarded_only=ties.leaders(only_positive, positive))


def first_order_cases(logits=(3.0, 1.5, 1.0, 0.5, 0.0, -0.5, -1.0, -2.0), step_size=0.05, likely=0, rare=7):
    """The first section's four cases on a softmax: {label: (first-order prediction, exact change)} of the entropy
    after one policy-gradient step on the likely or the rare token with advantage +1 or -1."""
    z = torch.tensor(logits)
    probs, log_probs = torch.softmax(z, -1), torch.log_softmax(z, -1)
    h_start = entropy_from_logits(z).item()
    checks = {}
    for label, (token, adv) in {'likely, A > 0': (likely, 1.0), 'likely, A < 0': (likely, -1.0),
                                'rare, A > 0': (rare, 1.0), 'rare, A < 0': (rare, -1.0)}.items():
        shift = step_size * adv * (torch.nn.functional.one_hot(torch.tensor(token), len(z)).float() - probs)
        checks[label] = (-(probs * (log_probs + h_start) * shift).sum().item(),
                         entropy_from_logits(z + shift).item() - h_start)
    return checks
