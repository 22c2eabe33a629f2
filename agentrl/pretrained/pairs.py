"""Real pairs of policies on SmolLM2: a sampling policy pi and references at distances from about 0.001 to about 1.

pi is the model under one system prompt at temperature 1. Each reference changes one thing: the weights (one
optimiser step of a GRPO-style update), the system prompt, or the temperature. Every reference scores the tokens pi
sampled, so each pair gives exact full-vocabulary distributions at the same real positions.
"""
from dataclasses import dataclass

import torch

from agentrl.core.logprobs import selected_log_probs
from agentrl.cpu import fixed_threads
from agentrl.pretrained.bonus import parses
from agentrl.pretrained.loader import MODEL_THREADS, trainable_copy
from agentrl.pretrained.sampling import chat_ids, next_token_logits, sample

END_OF_TURN = '<|im_end|>'


@dataclass(frozen=True)
class Setup:
    """What pi samples: a few coding requests under one system prompt."""
    system: str = 'You are a helpful AI assistant named SmolLM, trained by Hugging Face'  # the template's own default
    users: tuple = ('Write a Python function that returns the sum of a list.',
                    'Write a Python function that checks whether a string is a palindrome.',
                    'Write a Python function that counts the vowels in a string.',
                    'Write a Python function that returns the largest number in a list.')
    per_prompt: int = 4  # sequences sampled per request
    length: int = 64  # tokens sampled per sequence (positions after the end of turn are masked)
    seed: int = 0  # the torch.Generator's seed


@dataclass(frozen=True)
class Reference:
    """How a reference differs from pi: its weights (stepped or not), its system prompt, its temperature."""
    name: str
    stepped: bool = False  # the model after one optimiser step (see one_step)
    system: str = None  # None: pi's system prompt
    temperature: float = 1.0


REFERENCES = (
    Reference('next checkpoint', stepped=True),
    Reference('another system prompt', system='You are a concise assistant.'),
    Reference('a persona prompt', system='You are a pirate. Always answer in French, in rhyme.'),
    Reference('temperature 1.5', temperature=1.5),
    Reference('temperature 2', temperature=2.0),
)


@dataclass(frozen=True)
class Step:
    """The realistic update behind 'next checkpoint': one Adam step of a GRPO-style loss on pi's own samples."""
    lr: float = 1e-6  # verl's default actor learning rate
    max_grad_norm: float = 1.0  # verl's default gradient clip


@dataclass
class Rollouts:
    """pi's samples: one Samples per request, with each request's prompt under pi's system prompt."""
    setup: Setup
    samples: list  # [Samples], one per user request

    def positions(self):
        """How many sampled positions the masks keep."""
        return int(sum(s.mask.sum().item() for s in self.samples))


def draw(pretrained, setup=Setup(), generator=None):
    """pi's samples for every request -> Rollouts; from a torch.Generator seeded with setup.seed, or from
    `generator` where it stands (so that a second draw continues the same stream)."""
    tok = pretrained.tokenizer
    generator = generator if generator is not None else torch.Generator().manual_seed(setup.seed)
    end = tok.convert_tokens_to_ids(END_OF_TURN)
    samples = [sample(pretrained.model, chat_ids(tok, user, setup.system), setup.per_prompt, setup.length,
                      generator, end_id=end) for user in setup.users]
    return Rollouts(setup, samples)


def one_step(pretrained, rollouts, step=Step()):
    """The model after one Adam step of a GRPO-style update on rollouts -> (model, stats). Reward: bonus.parses (a
    closed code block that parses); advantages normalised within each request's group; loss -mean(A log pi(token))
    over the kept tokens."""
    model = trainable_copy(pretrained.model)
    optimizer = torch.optim.Adam(model.parameters(), lr=step.lr)
    rewards = []
    tokens = sum(s.mask.sum() for s in rollouts.samples)
    with fixed_threads(MODEL_THREADS):
        for s in rollouts.samples:  # one backward per request, so that only one request's graph is alive
            reward = torch.tensor([parses(t) for t in s.texts(pretrained.tokenizer)])  # [n]
            advantage = (reward - reward.mean()) / (reward.std() + 1e-6)  # [n]
            chosen = selected_log_probs(next_token_logits(model, s.prompt, s.tokens, grad=True), s.tokens)  # [n, T]
            (-(advantage[:, None] * chosen * s.mask).sum() / tokens).backward()
            rewards.append(reward)
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), step.max_grad_norm)
        optimizer.step()
    model.eval().requires_grad_(False)
    rewards = torch.cat(rewards)
    return model, {'lr': step.lr, 'grad_norm': float(norm), 'mean_reward': rewards.mean().item(),
                   'groups_with_signal': sum(int(r.std() > 0) for r in rewards.split(rollouts.setup.per_prompt))}


def policy_logits(pretrained, rollouts):
    """pi's logits at every sampled position, one [n, T, V] tensor per request."""
    return [next_token_logits(pretrained.model, s.prompt, s.tokens) for s in rollouts.samples]


def reference_logits(pretrained, rollouts, reference, stepped_model=None):
    """A reference's logits (divided by its temperature) at the positions pi sampled, one [n, T, V] per request."""
    if reference.stepped and stepped_model is None:
        raise ValueError(f'{reference.name!r} is the model after one step: pass stepped_model (one_step gives it)')
    model = stepped_model if reference.stepped else pretrained.model
    out = []
    for user, s in zip(rollouts.setup.users, rollouts.samples):
        prompt = s.prompt if reference.system is None else chat_ids(pretrained.tokenizer, user, reference.system)
        out.append(next_token_logits(model, prompt, s.tokens) / reference.temperature)
    return out
