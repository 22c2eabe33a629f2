"""A transformers causal LM as the GRPO engine sees a policy, and the chat codec that turns tasks into token ids."""
from dataclasses import dataclass

import torch

from agentrl.pretrained.bonus import code_block
from agentrl.pretrained.sampling import chat_ids
from agentrl.realrl.prefix import context_forward

END_OF_TURN = '<|im_end|>'  # SmolLM2's chat template closes every turn with this token


def context_key(index):
    """The id that stands, in column 0 of an engine row, for prompt `index` of the policy's contexts (negative: no
    token has it, and the engine never scores column 0's token)."""
    return -1 - index


class CausalLMPolicy(torch.nn.Module):
    """policy(ids [B, T], widths=None) -> logits [B, T, V], as agentrl.substrate.grpo.rl_update calls a policy.

    A row is [context_key(k), reply tokens], right-padded: it continues prompt k of `contexts` ([P_k] ids each), whose
    last token stands in column 0, so column 0's logits score the reply's first token. Each prompt is computed once
    per call, however many rows continue it, and the columns after the widest row of `widths` (how many leading
    positions each row's reader needs) are not computed at all: their logits are zero (agentrl.realrl.prefix).
    Under causal attention a row's padding never reaches its own earlier positions, so no attention mask is needed.
    """

    def __init__(self, lm, contexts=()):
        super().__init__()
        self.lm, self.contexts = lm, list(contexts)

    def forward(self, ids, widths=None):
        keys = -1 - ids[:, 0]  # [B]
        bad = (keys < 0) | (keys >= len(self.contexts))
        if bad.any():
            raise ValueError(f'column 0 of every row must be a context key, context_key(k) for k in '
                             f'0..{len(self.contexts) - 1}; got {ids[bad.nonzero()[0, 0], 0].item()}')
        return context_forward(self.lm, self.contexts, keys, ids, widths)  # [B, T, V]


@dataclass
class ChatCodec:
    """Task prompts to ids and replies to text, through a transformers tokenizer's chat template."""
    tokenizer: object

    @property
    def end_id(self):
        return self.tokenizer.convert_tokens_to_ids(END_OF_TURN)

    @property
    def pad_id(self):
        return self.end_id  # padding sits after a row's last policy token, where nothing reads it

    def prompt(self, task):
        """The chat template's ids for the task's system turn, its example turns and its question, ready for the
        reply -> [P]."""
        return chat_ids(self.tokenizer, task.user, task.system, task.examples)

    def finished(self, task):
        """A stop test for replies to `task` (sample_replies' `finished`), or None: a code reply ends once its first
        code block has closed (the reward reads nothing after it); an arithmetic reply only at its end of turn."""
        if task.family != 'code':
            return None
        return lambda tokens: '```' in self.tokenizer.decode(tokens[-2:]) and code_block(
            self.tokenizer.decode(tokens, skip_special_tokens=True)) is not None

    def text(self, tokens, mask):
        """One reply's text up to its end of turn (tokens, mask [T])."""
        return self.tokenizer.decode(tokens[mask.bool()], skip_special_tokens=True)


def stop_test(codec, tasks):
    """sample_replies' `finished` for replies to `tasks` (one prompt each, in order), or None when none stops early."""
    tests = [codec.finished(task) for task in tasks]
    if not any(tests):
        return None
    return lambda g, tokens: tests[g] is not None and tests[g](tokens)
