"""The actor-critic network of the PPO trainer (``train.masked_ppo``) and its warm start, forward and backward by hand.

``ActorCritic(policy)`` views an sb3-contrib ``MaskableActorCriticPolicy`` (separate actor and critic networks,
``Linear, Tanh, ..., Linear``) as two ``TanhMLP``, sharing its parameters, so an optimizer step is a step of the
policy and the checkpoint stays sb3's. ``TanhMLP.forward(x)`` keeps each layer's input, ``backward(grad)`` sets
every parameter's ``.grad`` from the gradient of the output: the same products and sums as autograd's (equal to
float32 rounding), without the graph, the saved-tensor bookkeeping and torch's ``tanh`` kernels (float32 ``tanh``
runs ~6x slower than ``sigmoid`` on this CPU build, so tanh is ``2 sigmoid(2x) - 1``, its derivative ``1 - y^2``
taken from its output). ``FlatParameters`` lays the parameters and their gradients out as one tensor each, so
Adam and the gradient norm are a few kernels a step. docs/PERFORMANCE.md, "PPO training speed", has the figures.

``matmul_dtype=torch.bfloat16`` runs the ``TanhMLP`` products in bfloat16 (AVX512-BF16 on this CPU: a 1,024 x
128 x 128 product in about 0.6 of the float32 time), the weights, biases, their gradients and Adam staying float32.
"""

from __future__ import annotations

from typing import Any

import torch


class FastTanh(torch.nn.Module):
    """``tanh`` as ``2 sigmoid(2x) - 1`` with the backward pass ``g (1 - y^2)``, for training only."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The same function as ``torch.tanh`` (to float32 rounding), through the faster ``sigmoid`` kernel."""
        return _FastTanhFunction.apply(x)


class _FastTanhFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        y = torch.sigmoid(x * 2.0).mul_(2.0).sub_(1.0)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return torch.addcmul(grad, grad, y * y, value=-1.0)


class TanhMLP:
    """A ``Linear, Tanh, ..., Linear`` network of sb3 modules with a hand-written forward and backward pass."""

    def __init__(self, hidden: torch.nn.Sequential, head: torch.nn.Linear,
                 matmul_dtype: torch.dtype = torch.float32) -> None:
        self.layers = [m for m in hidden if isinstance(m, torch.nn.Linear)] + [head]
        self.matmul_dtype = matmul_dtype
        self.inputs: list[torch.Tensor] = []
        self.weights: list[torch.Tensor] = []

    def forward(self, x: torch.Tensor, keep: bool = True) -> torch.Tensor:
        """The network's output [B, out] (the parameters' dtype, no autograd) for inputs [B, in]; ``keep`` saves
        what ``backward`` needs."""
        with torch.no_grad():
            weights = [layer.weight.to(self.matmul_dtype) for layer in self.layers]
            h, inputs, last = x.to(self.matmul_dtype), [], len(self.layers) - 1
            for i, (layer, w) in enumerate(zip(self.layers, weights, strict=True)):
                inputs.append(h)
                z = torch.mm(h, w.t()).to(layer.bias.dtype).add_(layer.bias)
                # tanh(z) = 2 sigmoid(2z) - 1: torch's float32 tanh kernel runs ~6x slower than sigmoid here
                h = z if i == last else torch.sigmoid(z.mul_(2.0)).mul_(2.0).sub_(1.0).to(self.matmul_dtype)
        if keep:
            self.inputs, self.weights = inputs, weights
        return h

    def backward(self, grad: torch.Tensor) -> None:
        """Set each parameter's ``.grad`` from ``grad`` [B, out], the loss's gradient at the last ``forward``."""
        with torch.no_grad():
            g = grad
            for i in range(len(self.layers) - 1, -1, -1):
                layer, h, gm = self.layers[i], self.inputs[i], g.to(self.matmul_dtype)
                # h^T g rather than (g^T h)^T: MKL runs the [in, B] x [B, out] product ~2x faster for in << out
                _set_grad(layer.weight, torch.mm(h.t(), gm).t())
                _set_grad(layer.bias, g.sum(0))
                if i > 0:  # back through layer i's input h = tanh(z): d tanh(z) / dz = 1 - h^2
                    g = torch.mm(gm, self.weights[i]).to(g.dtype)
                    hf = h.to(g.dtype)
                    g = torch.addcmul(g, g, hf * hf, value=-1.0)
        self.inputs, self.weights = [], []


def _set_grad(param: torch.Tensor, value: torch.Tensor) -> None:
    """Write ``value`` into ``param.grad`` in place (a view of ``FlatParameters``' buffer), or set it."""
    if param.grad is None:
        param.grad = value.to(param.dtype).contiguous()
    else:
        param.grad.copy_(value)


class FlatParameters:
    """A policy's parameters and their gradients as views of one buffer each, so Adam and the gradient norm run
    on one tensor (a handful of kernels a step, not a handful per weight and bias); ``release()`` undoes it."""

    def __init__(self, params: list[torch.nn.Parameter]) -> None:
        self.params = params
        self.flat = torch.nn.Parameter(torch.cat([p.detach().reshape(-1) for p in params]))
        self.flat.grad = torch.zeros_like(self.flat)
        self.slices, start = [], 0
        for p in params:
            self.slices.append(slice(start, start + p.numel()))
            p.data, p.grad = self.flat.data[self.slices[-1]].view_as(p), self.flat.grad[self.slices[-1]].view_as(p)
            start += p.numel()

    def per_parameter(self, optimizer: torch.optim.Adam) -> torch.optim.Adam:
        """An Adam over the policy's own parameters holding ``optimizer``'s state (the one sb3 saves and loads)."""
        out = torch.optim.Adam(self.params, **{k: optimizer.defaults[k] for k in ("lr", "eps", "fused")})
        state = optimizer.state.get(self.flat)
        for p, part in zip(self.params, self.slices, strict=True) if state else ():
            out.state[p] = {"step": state["step"].clone(), "exp_avg": state["exp_avg"][part].view_as(p).clone(),
                            "exp_avg_sq": state["exp_avg_sq"][part].view_as(p).clone()}
        return out

    def release(self) -> None:
        """Give every parameter its own storage again, with no gradient."""
        for p in self.params:
            p.data, p.grad = p.data.clone(), None


class ActorCritic:
    """The actor's logits and the critic's value of an sb3 ``MaskableActorCriticPolicy`` (separate networks), two
    ways: autograd modules (``actor``, ``critic``; ``swap_tanh(True)`` puts ``FastTanh`` in them) and hand-written
    passes (``fast_actor``, ``fast_critic``)."""

    def __init__(self, policy: Any, matmul_dtype: torch.dtype = torch.float32) -> None:
        self.policy = policy
        extractor = policy.mlp_extractor
        self.actor = torch.nn.Sequential(extractor.policy_net, policy.action_net)
        self.critic = torch.nn.Sequential(extractor.value_net, policy.value_net)
        self.fast_actor = TanhMLP(extractor.policy_net, policy.action_net, matmul_dtype)
        self.fast_critic = TanhMLP(extractor.value_net, policy.value_net, matmul_dtype)

    def __call__(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(logits [B, A], values [B]) for observations [B, F], through the autograd modules."""
        return self.actor(obs), self.critic(obs).squeeze(-1)

    def infer(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(logits [B, A], values [B]) through the hand-written passes, keeping nothing for a backward pass."""
        return self.fast_actor.forward(obs, keep=False), self.fast_critic.forward(obs, keep=False).squeeze(-1)

    def swap_tanh(self, fast: bool) -> None:
        """Use ``FastTanh`` (``fast``) or ``torch.nn.Tanh`` in every hidden layer (the saved model has Tanh)."""
        for net in (self.policy.mlp_extractor.policy_net, self.policy.mlp_extractor.value_net):
            for i, layer in enumerate(net):
                if isinstance(layer, torch.nn.Tanh | FastTanh):
                    net[i] = FastTanh() if fast else torch.nn.Tanh()
