"""agentrl: the helper package of the chapter-10 companion (KL, entropy and regularisation)."""
from agentrl.logprobs import check_same_shape, entropy_from_logits, masked_mean, selected_log_probs
from agentrl.regularization import (KL_ESTIMATE_KINDS, KL_KINDS, check_kl_kind, entropy_bonus, kl_estimate, kl_penalty,
                                     regularized_update, sequence_kl, train_regularized)
from agentrl.exact import estimator_moments, expected_loss_grad, kl_grads
from agentrl.evaluation import diversity, pass_at_k
