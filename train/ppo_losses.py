"""PPO's actor losses over masked actions (MaskablePPO's formulas) and, for ``train.masked_ppo``'s hand-written
update, their gradient in the logits.

``masked_log_probs`` is the categorical over the legal actions (illegal logits set to MaskablePPO's -1e8);
``actor_loss_grad`` gives the clipped surrogate, the entropy loss, the log-ratio and ratio (for the approximate KL
and the clip fraction) and, ``by_hand``, the gradient of ``pg_loss + ent_coef * entropy_loss`` in the logits, so
the update needs no autograd graph (``tests/test_masked_ppo.py`` checks it against autograd's).
"""

from __future__ import annotations

import torch

#: MaskablePPO's logit for an illegal action (``sb3_contrib.common.maskable.distributions``): probability ~0.
ILLEGAL_LOGIT = -1e8


def masked_log_probs(logits: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
    """Log-probabilities [B, A] of the categorical over the legal actions (illegal ones ~ -1e8)."""
    return torch.log_softmax(torch.where(masks, logits, torch.tensor(ILLEGAL_LOGIT)), dim=-1)


def actor_loss_grad(log_probs: torch.Tensor, masks: torch.Tensor, actions: torch.Tensor, old_logp: torch.Tensor,
                    adv: torch.Tensor, clip_range: float, ent_coef: float, *,
                    by_hand: bool = True) -> tuple[tuple[torch.Tensor, ...], torch.Tensor | None]:
    """PPO's actor losses (clipped surrogate, entropy; log-ratio and ratio for the KL and clip figures: MaskablePPO's
    formulas) and, ``by_hand``, the gradient of ``pg_loss + ent_coef * entropy_loss`` in the logits [B, A]
    (autograd's, to rounding; else None).

    The surrogate's gradient in ``logp`` is ``-adv ratio / B`` where the unclipped term is the smaller one (else
    the clipped term is constant), and ``d logp / d logits = onehot(action) - p``; the entropy loss ``-H``'s is
    ``p (log p + H) / B`` on the legal actions. An illegal action's p is 0, so its logit gets no gradient."""
    batch = len(actions)
    probs = log_probs.exp()
    log_ratio = log_probs.gather(1, actions[:, None]).squeeze(1) - old_logp
    ratio = log_ratio.exp()
    unclipped, clipped = adv * ratio, adv * ratio.clamp(1 - clip_range, 1 + clip_range)
    pg_loss = -torch.min(unclipped, clipped).mean()
    plogp = torch.where(masks, probs * log_probs, 0.0)
    entropy = -plogp.sum(-1)
    if not by_hand:
        return (pg_loss, -entropy.mean(), log_ratio, ratio), None
    g_logp = torch.where(unclipped <= clipped, unclipped, 0.0).mul_(-1.0 / batch)
    grad = (probs * -g_logp[:, None]).scatter_add_(1, actions[:, None], g_logp[:, None])
    if ent_coef:
        grad += (plogp + probs * entropy[:, None]) * (ent_coef / batch)
    return (pg_loss, -entropy.mean(), log_ratio, ratio), grad
