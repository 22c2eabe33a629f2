"""Layer 3, chapter 10: regulariser plug-ins for the GRPO engine, evaluation, runs as specs, claims."""
