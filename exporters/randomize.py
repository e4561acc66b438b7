"""Fill every parameter and floating-point buffer of a module with seeded random values.

Why not keep the default init: default init leaves all-zero biases, unit norm scales and
BatchNorm statistics of 0/1.  Exporters treat those specially (the TorchScript exporter
dedupes identical zero tensors into Identity nodes, the dynamo optimizer folds or drops
them), so a default-init export is not the graph a trained checkpoint would give.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def randomize_(module: nn.Module, seed: int = 0) -> nn.Module:
    """Overwrite, in place, every parameter and floating buffer of ``module``; return it.

    Values are drawn from one ``torch.Generator`` seeded with ``seed`` in ``named_parameters``
    then ``named_buffers`` order, so the same seed gives the same weights.  Scales are chosen so
    activations stay O(1) through a deep net:

    - norm scales (1-D ``weight`` of BatchNorm/LayerNorm): uniform in [0.5, 1.5]
    - biases, BatchNorm ``running_mean``: normal, std 0.05
    - BatchNorm ``running_var``: uniform in [0.5, 1.5] (positive, as a variance must be)
    - matrices and conv kernels: normal, std 1/sqrt(fan_in) (He-like; 0.02 for embeddings)

    Tied parameters (GPT-2's ``lm_head.weight`` is ``transformer.wte.weight``) are visited once.
    Integer buffers (``num_batches_tracked``) are left alone: they are not used in eval mode.
    """
    gen = torch.Generator().manual_seed(seed)
    owners = {}
    for mod_name, mod in module.named_modules():
        for pname, _ in mod.named_parameters(recurse=False):
            owners[f"{mod_name}.{pname}" if mod_name else pname] = mod
        for bname, _ in mod.named_buffers(recurse=False):
            owners[f"{mod_name}.{bname}" if mod_name else bname] = mod
    tensors = list(module.named_parameters()) + list(module.named_buffers())
    with torch.no_grad():
        for name, t in tensors:
            if not t.is_floating_point():
                continue
            t.copy_(_draw(name, t, owners[name], gen).to(t.dtype))
    return module


def _draw(name: str, t: torch.Tensor, owner: nn.Module, gen: torch.Generator) -> torch.Tensor:
    """One random tensor shaped like ``t``, scaled by what the tensor is (see ``randomize_``)."""
    leaf = name.rsplit(".", 1)[-1]
    shape = t.shape

    def normal(std: float) -> torch.Tensor:
        return torch.randn(shape, generator=gen) * std

    def uniform(lo: float, hi: float) -> torch.Tensor:
        return lo + (hi - lo) * torch.rand(shape, generator=gen)

    if leaf == "running_var":
        return uniform(0.5, 1.5)
    if leaf in ("bias", "running_mean"):
        return normal(0.05)
    if t.dim() == 1:  # BatchNorm / LayerNorm scale
        return uniform(0.5, 1.5)
    if isinstance(owner, nn.Embedding):
        return normal(0.02)
    # [out, in, *kernel] layout; transformers' Conv1D stores [in, out]
    fan_in = t[0].numel() if isinstance(owner, (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)) else shape[0]
    return normal(1.0 / math.sqrt(fan_in))
