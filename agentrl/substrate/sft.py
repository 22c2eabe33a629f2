"""The RL base agent: TinyAgent fine-tuned on demonstrations of scripted agents, so that it mostly guesses.

Phase 1 imitates a careful agent that always reads the whole function and fixes what it sees: it
teaches the mechanics (calls, reading, copying the line label and the fix). Phase 2 imitates the
scripted agent whose habits the RL base keeps: it reads in 40% of its episodes, half of those only a
peek at the first lines; when it saw the bug it fixes it, otherwise it guesses one of the family's
usual bugs; now and then it first makes a malformed or out-of-range call. The result reads in about
one episode of five, succeeds in about one of eight, and its policy tokens keep ~0.6 nats of entropy.
`make_rl_base` caches the weights on disk, keyed by everything that determines them.
"""
import dataclasses
import hashlib
import json
import math
import random
from pathlib import Path

import torch

from agentrl.cpu import adam, fixed_threads
from agentrl.fingerprint import code_fingerprint, kernel_choice
from agentrl.paths import cache_dir
from agentrl.substrate.config import CAREFUL, active
from agentrl.substrate.gym import END, MAX_LINES, Env, draw_offset, make_tasks
from agentrl.substrate.model import ModelConfig, TinyAgent
from agentrl.progress import progress
from agentrl.verified_cache import load_verified, save_verified



def _slip(task, offset, rng, kind='mixed'):
    """A bad call the scripted agent sometimes makes, in its task's grammar.

    kind 'mixed': a missing argument, an argument after submit, the tool named after its line, reading or editing
    past the end. kind 'choice': only calls whose every word the grammar allows there, with a wrong line label
    (reading or editing past the end, reading a range backwards), so no word the grammar forces loses certainty.
    """
    end = offset + len(task.lines)
    line, wrong, right = task.sites[rng.randrange(len(task.sites))]
    calls = task.calls
    past_end = [calls.spell('read', f'L{offset + 1}', f'L{end + 1}'), calls.spell('edit', f'L{end + 1}', wrong, right)]
    if kind == 'choice':
        slips = [calls.spell('read', f'L{end}', f'L{offset + 1}')] if end > offset + 1 else []
        slips += past_end if end < MAX_LINES else []
        return rng.choice(slips or [calls.spell('read', f'L{end}', f'L{offset + 1}')])
    edit_words = calls.spell('edit', f'L{offset + line}', wrong, right).split()
    slips = [f'read L{rng.randint(1, end)}', ' '.join(edit_words[:-1] if task.grammar == 'short' else edit_words[:-2]),
             f'submit L{end}', ' '.join([edit_words[1], 'edit', *edit_words[2:]])]
    if end < MAX_LINES:
        slips += past_end
    return rng.choice(slips)


def _neighbour(task, rng):
    """A line of the function next to its bug line (where a careless agent writes the fix it saw)."""
    choices = [n for n in (task.bug_line - 1, task.bug_line + 1) if 2 <= n <= len(task.lines)]
    return choices[rng.randrange(len(choices))]


def demonstration_calls(task, offset, rng, habits):
    """The scripted agent's calls for one episode on task (it knows the bug only if its read shows it)."""
    first_line, end = offset + 1, offset + len(task.lines)
    calls = []
    spell = task.calls.spell

    def call(text):
        if rng.random() < habits.slip:
            calls.append(_slip(task, offset, rng, habits.slips))
        calls.append(text)

    candidates = list(task.sites)
    knows_fix = False
    if rng.random() < habits.read:
        if rng.random() < habits.full_read:
            first, last = first_line, end
        else:  # a peek at the function's first lines
            first, last = first_line, first_line + rng.randint(1, 2)
        call(spell('read', f'L{first}', f'L{last}'))
        if first <= offset + task.bug_line <= last:
            knows_fix = True
        else:
            candidates = [s for s in candidates if not first <= offset + s[0] <= last] or candidates
    if knows_fix and habits.mislabel and rng.random() < habits.mislabel:  # saw the fix, writes it a line off
        call(spell('edit', f'L{offset + _neighbour(task, rng)}', task.wrong, task.right))
    elif knows_fix:
        call(task.fix(offset))
    else:
        line, wrong, right = candidates[rng.randrange(len(candidates))]
        call(spell('edit', f'L{offset + line}', wrong, right))
    call('submit')
    return calls


def demonstration(task, rng, habits, tok, max_turns=6):
    """One scripted episode at a random offset -> (token ids [L], policy mask [L]: True on the agent's words)."""
    env = Env(max_turns=max_turns)
    offset = draw_offset(task, rng.random())
    ids = tok.encode(env.reset(task, offset))
    mask = [False] * len(ids)
    for text in demonstration_calls(task, offset, rng, habits):
        if env.done:
            break
        words = text.split() + [END]
        ids += tok.encode(words)
        mask += [True] * len(words)
        observation, _ = env.step(words)
        ids += tok.encode(observation)
        mask += [False] * len(observation)
    return ids, mask


def make_demonstrations(tasks, tok, habits, episodes, rng):
    """`episodes` scripted episodes with these habits, cycling over tasks -> list of (ids, mask)."""
    return [demonstration(tasks[i % len(tasks)], rng, habits, tok) for i in range(episodes)]


def sft_train(model, demos, pad_id, steps, batch_size, lr, weight_decay, generator, desc='SFT'):
    """Behaviour cloning: cross-entropy on the demonstrations' policy tokens, `steps` AdamW steps -> losses."""
    T = max(len(ids) for ids, _ in demos)
    ids = torch.full((len(demos), T), pad_id, dtype=torch.long)
    mask = torch.zeros(len(demos), T - 1)
    for b, (seq, policy) in enumerate(demos):
        ids[b, :len(seq)] = torch.tensor(seq)
        mask[b, :len(seq) - 1] = torch.tensor(policy[1:], dtype=torch.float)
    lengths = (ids != pad_id).sum(1)
    optimizer = adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 0.1 + 0.45 * (1 + math.cos(math.pi * s / steps)))
    order, losses = torch.empty(0, dtype=torch.long), []
    for _ in progress(range(steps), desc=desc):
        if len(order) < batch_size:
            order = torch.cat([order, torch.randperm(len(demos), generator=generator)])
        rows, order = order[:batch_size], order[batch_size:]
        width = int(lengths[rows].max())
        batch, batch_mask = ids[rows, :width], mask[rows, :width - 1]
        on_policy = batch_mask.bool()  # [b, width-1]: positions whose next token the agent wrote
        logits = model.logits(model.features(batch)[:, :-1][on_policy])  # [n, V], only where the loss is taken
        loss = -torch.log_softmax(logits, -1).gather(1, batch[:, 1:][on_policy][:, None]).mean()
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
    return losses


BUILD_THREADS = 2  # torch threads while building: a fixed number, so the weights do not depend on the machine


def build_rl_base(tok, tasks, model_cfg, sft_cfg):
    """Seeded two-phase SFT of a fresh TinyAgent on scripted episodes (no cache) -> model.

    Phase 1 imitates a careful agent (reads the whole function, fixes what it sees); phase 2 imitates
    the scripted agent of sft_cfg.habits, which sets the RL base's habits (reads rarely, guesses).
    """
    with fixed_threads(BUILD_THREADS):
        torch.manual_seed(sft_cfg.seed)
        generator = torch.Generator().manual_seed(sft_cfg.seed)
        rng = random.Random(sft_cfg.seed)
        model = TinyAgent(model_cfg)
        for habits, steps, lr, desc in [(CAREFUL, sft_cfg.careful_steps, sft_cfg.careful_lr, 'SFT careful'),
                                        (sft_cfg.habits, sft_cfg.habit_steps, sft_cfg.habit_lr, 'SFT habits')]:
            if steps:
                demos = make_demonstrations(tasks, tok, habits, steps * sft_cfg.batch_size, rng)
                sft_train(model, demos, tok.pad_id, steps, sft_cfg.batch_size, lr, sft_cfg.weight_decay, generator, desc)
    return model.eval()


def rl_base_description(tok, tasks, model_cfg, sft_cfg):
    """Everything that determines the RL base's weights, as JSON: settings, vocabulary, tasks, code, kernels, torch."""
    content = dict(code=code_fingerprint(), kernels=kernel_choice(), torch=torch.__version__, threads=BUILD_THREADS,
                   vocabulary=tok.words, tasks=[(t.task_id, t.source, t.fix(), repr(t.tests), t.sites, t.grammar, t.offset_cap)
                                                for t in tasks],
                   model=dataclasses.asdict(model_cfg), sft=dataclasses.asdict(sft_cfg))
    return json.loads(json.dumps(content, default=repr))


def cache_key(tok, tasks, model_cfg, sft_cfg):
    """SHA-256 of everything that determines the RL base's weights (it names the cache file)."""
    description = rl_base_description(tok, tasks, model_cfg, sft_cfg)
    return hashlib.sha256(json.dumps(description, sort_keys=True).encode()).hexdigest()


def model_config(vocab_size, substrate=None):
    """TinyAgent's ModelConfig for a vocabulary under `substrate` (default: the active one): its heads, init, logit scale."""
    config = active() if substrate is None else substrate
    return ModelConfig(vocab_size=vocab_size, n_head=config.n_head, init_std=config.init_std,
                       logit_scale=config.logit_scale)


def make_rl_base(tok, tasks=None, sft_cfg=None, model_cfg=None, directory=None):
    """The RL base agent (TinyAgent after SFT; model(ids [B, T]) -> logits [B, T, V]), built once then loaded from disk.

    Defaults (tasks, SFT, model) are the active substrate's (agentrl.substrate.config.active()).
    The cache file is named by cache_key and stores, beside the weights, their checksum and the full description
    they were built from (agentrl.verified_cache): a corrupt or mismatched file is rebuilt with a warning. A
    directory at the file's path raises IsADirectoryError before anything is built.
    """
    tasks = make_tasks('train') if tasks is None else tasks
    sft_cfg = active().sft if sft_cfg is None else sft_cfg
    model_cfg = model_config(len(tok)) if model_cfg is None else model_cfg
    description = rl_base_description(tok, tasks, model_cfg, sft_cfg)
    key = cache_key(tok, tasks, model_cfg, sft_cfg)
    directory = Path(directory) if directory is not None else cache_dir()
    path = directory / f'rl_base-{key[:16]}.pt'
    state_dict = load_verified(path, description, 'cached RL base')
    if state_dict is not None:
        model = TinyAgent(model_cfg)
        model.load_state_dict(state_dict)
        return model.eval()
    model = build_rl_base(tok, tasks, model_cfg, sft_cfg)
    save_verified(path, model.state_dict(), description)
    return model
