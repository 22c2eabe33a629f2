"""Layer 2, the substrate: chapters 1-9's TinyAgent (gym, tokenizer, model, RL base, sampling, GRPO engine).

It knows nothing of chapter 10: regularisers join the engine as plug-ins from agentrl.ch10.
"""
