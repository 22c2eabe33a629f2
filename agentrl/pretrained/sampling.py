"""Prompts, sampling and full-vocabulary log-probabilities for a transformers causal LM, on a fixed thread count."""
from dataclasses import dataclass

import torch

from agentrl.cpu import fixed_threads
from agentrl.pretrained.loader import MODEL_THREADS
from agentrl.progress import beat


def chat_ids(tokenizer, user, system=None, examples=()):
    """The chat template's token ids for one user turn (after an optional system turn and the answered example turns
    `examples`, ((user, assistant), ...)), ready to answer -> [P]."""
    turns = [{'role': 'system', 'content': system}] if system is not None else []
    for question, answer in examples:
        turns += [{'role': 'user', 'content': question}, {'role': 'assistant', 'content': answer}]
    turns.append({'role': 'user', 'content': user})
    text = tokenizer.apply_chat_template(turns, add_generation_prompt=True, tokenize=False)
    return torch.tensor(tokenizer(text, add_special_tokens=False)['input_ids'])


@dataclass
class Samples:
    """Continuations sampled after one prompt."""
    prompt: torch.Tensor  # [P], the prompt's ids
    tokens: torch.Tensor  # [N, T], the sampled ids
    mask: torch.Tensor  # [N, T], 1.0 up to and including the first end-of-turn token, 0.0 after it
    logp: torch.Tensor = None  # [N, T, V], each position's log-distribution at the sampling temperature (keep_logp)

    def texts(self, tokenizer):
        """Each continuation decoded up to its end of turn."""
        return [tokenizer.decode(row[m.bool()], skip_special_tokens=True) for row, m in zip(self.tokens, self.mask)]


def sample(model, prompt, n, length, generator, temperature=1.0, end_id=None, keep_logp=False):
    """n continuations of `length` tokens after prompt [P], each token drawn from softmax(logits / temperature)
    with `generator` -> Samples. Rows keep sampling after their end-of-turn token; the mask drops those positions.
    keep_logp: also keep every position's whole log-distribution (Samples.logp), which the draws do not read."""
    if temperature <= 0:
        raise ValueError(f'temperature must be > 0, got {temperature}')
    tokens = torch.empty(n, length, dtype=torch.long)
    kept = [] if keep_logp else None
    with fixed_threads(MODEL_THREADS), torch.no_grad():
        out = model(prompt.expand(n, -1), use_cache=True)
        for t in range(length):
            probs = torch.softmax(out.logits[:, -1].float() / temperature, -1)  # [N, V]
            tokens[:, t] = torch.multinomial(probs, 1, generator=generator)[:, 0]
            if keep_logp:
                kept.append(torch.log_softmax(out.logits[:, -1].float() / temperature, -1))  # [N, V]
            beat()  # a long sampling loop on a busy machine is work, not a hang
            if t + 1 < length:
                out = model(tokens[:, t:t + 1], cache=out.cache, use_cache=True)
    mask = torch.ones(n, length)
    if end_id is not None:
        ended = (tokens == end_id).long().cumsum(-1)  # [N, T], how many ends at or before t
        mask = ((ended - (tokens == end_id).long()) == 0).float()  # the first end itself stays in
    return Samples(prompt, tokens, mask, torch.stack(kept, 1) if keep_logp else None)


def next_token_logits(model, prompt, tokens, grad=False):
    """Logits over the whole vocabulary at each sampled position: those of the distribution that drew tokens[:, t]
    given the prompt and tokens[:, :t] -> [N, T, V] float32, float64 for a float64 model (with grad if grad=True)."""
    n, length = tokens.shape
    ids = torch.cat([prompt.expand(n, -1), tokens], 1)  # [N, P + T]
    with fixed_threads(MODEL_THREADS), torch.set_grad_enabled(grad):
        logits = model(ids).logits[:, prompt.numel() - 1:-1]  # [N, T, V]
        return logits.to(torch.promote_types(logits.dtype, torch.float32))  # float64 stays float64 (the tests)


def next_token_logprobs(model, prompt, tokens, temperature=1.0, grad=False):
    """next_token_logits as log-probabilities at a sampling temperature -> [N, T, V] float32."""
    if temperature <= 0:
        raise ValueError(f'temperature must be > 0, got {temperature}')
    logits = next_token_logits(model, prompt, tokens, grad)
    with torch.set_grad_enabled(grad):
        return torch.log_softmax(logits / temperature, -1)
