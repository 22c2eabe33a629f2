"""agentrl: the helper package of the chapter-10 companion (KL, entropy and regularisation)."""
from agentrl.logprobs import check_same_shape, entropy_from_logits, masked_mean, selected_log_probs
from agentrl.regularization import (KL_ESTIMATE_KINDS, KL_KINDS, adapt_kl_coef, centered_cross_product, check_kl_kind,
                                     clip_cov_selection, entropy_bonus, kl_cov_selection, kl_estimate, kl_penalty,
                                     regularized_update, sequence_kl, train_regularized)
from agentrl.exact import estimator_moments, expected_loss_grad, kl_grads
from agentrl.evaluation import diversity, pass_at_k
# The TinyAgent substrate (chapters 1-9): gym, tokenizer, model, RL base, sampling, GRPO.
from agentrl.gym import Env, Task, make_env, make_tasks
from agentrl.tokenizer import Tokenizer, build_tokenizer
from agentrl.model import ModelConfig, TinyAgent, count_parameters
from agentrl.sft import Habits, SFTConfig, make_rl_base
from agentrl.rollout import Trajectory, behavior_stats, collate, run_episodes, sample_groups, sample_step
from agentrl.grpo import (NonFiniteLossError, RLConfig, compute_advantages, heldout_pass_at_1, policy_loss, rl_update,
                          skipped_update, train_rl)
