"""GRPO on a real language model (SmolLM2-135M-Instruct): tasks with a verifiable reward, their pilot, and runs."""
