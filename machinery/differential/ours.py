"""Our side of checks that several frameworks share: pieces of agentrl that need a model, given one made of a case."""
import torch

from agentrl.ch10.regularizers import KLInReward


class ReferenceOf:
    """A reference model for our KLInReward, which reads the reference's log-probs from a model: it returns
    two-token logits whose log-softmax at token 0 is the given log-probs (logit 0 = ref_logp, logit 1 =
    log(1 - p_ref)), at position t + 1. The given log-probs must be < 0, as a softmax's are."""

    def __init__(self, ref_logp):
        self.ref_logp = ref_logp.detach()

    def __call__(self, ids):
        first = self.ref_logp
        second = torch.log(-torch.expm1(first))
        logits = torch.stack([first, second], -1)  # [B, T, 2]
        return torch.cat([logits, logits[:, -1:]], 1)  # [B, T + 1, 2]: position t predicts token t + 1


def kl_shaped_rewards(case, coef):
    """The case's rewards after our KLInReward at `coef`: each less coef times its row's summed k1 of old_logp
    against ref_logp over policy tokens -> [B]."""
    rows, width = case['mask'].shape
    # the cases' ref_logp (logp plus noise) can exceed 0, which no softmax gives: both log-probs our k1 subtracts
    # are lowered by one constant, which leaves their difference as it is
    shift = float(torch.clamp(case['ref_logp'].detach().max(), min=0)) + 1
    shaping = KLInReward(reference=ReferenceOf(case['ref_logp'] - shift), coef=coef)
    shaping.temperature = 1.0
    batch = dict(ids=torch.zeros(rows, width + 1, dtype=torch.long), sample_logp=case['old_logp'].detach() - shift,
                 action_mask=case['mask'], rewards=case['rewards'].detach())
    shaping.shape_rewards(batch, {})
    return batch['rewards']
