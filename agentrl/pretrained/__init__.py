"""A real pretrained language model (SmolLM2-135M-Instruct) for the chapter's distribution facts: notebook 14."""
