"""agentrl: the helper package of the chapter-10 companion (KL, entropy and regularisation)."""
from agentrl.logprobs import check_same_shape, entropy_from_logits, masked_mean, selected_log_probs
from agentrl.regularization import KL_ESTIMATE_KINDS, KL_KINDS, check_kl_kind, kl_estimate, kl_penalty
from agentrl.exact import estimator_moments, expected_loss_grad, kl_grads
