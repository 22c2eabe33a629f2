"""agentrl: the runnable companion to chapter 10 (KL, entropy and regularisation).

Layers, each importing only from the ones above it:
  core/         math on tensors: log-probs, entropy, KL estimators, exact enumerations, pass@k, and the options the RL
                frameworks ship (off-policy KL weights, loss aggregation, sequence ratios, sampler weights, entropy control)
  substrate/    chapters 1-9's TinyAgent: task families, gym, tokenizer, model, RL base, sampling, the GRPO engine
  ch10/         chapter 10: regulariser plug-ins for the engine, held-out evaluation, runs, claims
  calibration/  the rows the substrate was fitted to, their measurement, the freeze rule, the frozen substrates
Shared utilities (paths, fingerprint, atomic writes, progress, plotting, the CPU pin) sit beside them, with the
chapter's map (chapter.py: sections, notebooks, the book's printed blocks) and side runs (side_runs.py).
The machinery that builds, checks and measures all this (runner, report, site, search) is the top-level machinery/
package beside agentrl; nothing here imports it.

Notebooks use `import agentrl as arl`; the names below are the public API the chapter's code calls.
"""
from agentrl.cpu import pin_cpu_kernels

pin_cpu_kernels()  # before torch is imported anywhere in the package: one instruction set on every x86-64 machine

from agentrl.core.logprobs import check_same_shape, entropy_from_logits, masked_mean, selected_log_probs  # noqa: E402
from agentrl.core.kl import KL_ESTIMATE_KINDS, KL_KINDS, check_kl_kind, kl_estimate, kl_penalty  # noqa: E402
from agentrl.core.exact import (TWO_TOKEN_KL_LOSSES, estimator_moments, expected_loss_grad,  # noqa: E402
                                expected_off_policy_kl, kl_grads, two_token_kl_grads, two_token_log_probs)
from agentrl.core.off_policy import (KL_WEIGHTINGS, SAMPLER_MODES, cispo_surrogate, clipped_objective,  # noqa: E402
                                     gspo_surrogate, ratio_weighted_kl, sampler_weights, sequence_log_ratio,
                                     sequence_sum)
from agentrl.core.aggregation import AGGREGATIONS, aggregate, relative_scale, sequence_scale, token_weights  # noqa: E402
from agentrl.core.entropy_control import adapt_entropy_coef, top_entropy_mask  # noqa: E402
from agentrl.core.metrics import pass_at_k  # noqa: E402
from agentrl.substrate.gym import Env, Task, make_env, make_tasks  # noqa: E402
from agentrl.substrate.tokenizer import Tokenizer, build_tokenizer  # noqa: E402
from agentrl.substrate.model import ModelConfig, TinyAgent, count_parameters  # noqa: E402
from agentrl.substrate.config import Habits, SFTConfig  # noqa: E402
from agentrl.substrate.sft import make_rl_base  # noqa: E402
from agentrl.substrate.rollout import (Trajectory, behavior_stats, collate, run_episodes, sample_groups,  # noqa: E402
                                       sample_step)
from agentrl.substrate.grpo import (NonFiniteLossError, Plugin, ReferenceKL, RLConfig, compute_advantages,  # noqa: E402
                                    heldout_pass_at_1, policy_loss, rl_update, sampler_config, skipped_update,
                                    token_reduce, train_rl)
from agentrl.ch10.regularizers import (AdaptiveKL, CovariancePolicyLoss, EntropyBonus, KLInReward,  # noqa: E402
                                       adapt_kl_coef, centered_cross_product, chapter_plugins, clip_cov_selection,
                                       entropy_bonus, is_finite_number, kl_cov_selection, regularized_update, sequence_kl,
                                       train_regularized)
from agentrl.ch10.framework_plugins import (FRAMEWORK_OPTIONS, CappedWeightLoss, EntropyTarget,  # noqa: E402
                                            SamplerCorrection, SequenceRatioLoss, TopEntropyUpdate, check_options,
                                            framework_plugins)
from agentrl.ch10.evaluation import diversity  # noqa: E402
