"""Batch-norm statistics for randomly initialised models.

A torchvision CNN built with random weights has batch norms whose running
statistics are the defaults (mean 0, variance 1), not its activations':
through a few dozen layers the activations vanish or blow up (MobileNetV2's
logits come out near 1e-8, all zero at int8), so an int8 figure measured on
it means nothing. Re-estimating the statistics on a few random batches, as
a trained model's would have been estimated on its data, gives each layer
activations of unit scale; then eval() uses them.

    from torchmcu.frontend.batchnorm import reestimate_batch_norm
    model = reestimate_batch_norm(tv.models.mobilenet_v2(width_mult=0.35), [torch.randn(8, 3, 96, 96)])
"""

from __future__ import annotations

from collections.abc import Iterable

import torch


def reestimate_batch_norm(model: torch.nn.Module, batches: Iterable[torch.Tensor | tuple[torch.Tensor, ...]]
                          ) -> torch.nn.Module:
    """Recompute every batch norm's running mean and variance as the plain
    average over `batches` (forward passes in training mode, no gradients);
    returns the model in eval mode."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    momenta = [m.momentum for m in norms]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # a cumulative average over the batches, not an exponential one
    model.train()
    with torch.no_grad():
        for b in batches:
            model(*(b if isinstance(b, tuple) else (b,)))
    for m, momentum in zip(norms, momenta):
        m.momentum = momentum
    return model.eval()
