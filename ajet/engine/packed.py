"""Linear layers whose weight is laid out once in oneDNN's blocked format, for the hf engine on a CPU.

A decode step multiplies a few rows (one per running request) by each weight. torch's default CPU
matmul (MKL's sgemm) repacks the weight into its own blocked layout on every such call, and for a
weight read from memory that packing, not the arithmetic, sets the time: on a 2-core AVX2 float32 path
SmolLM2's 30 layers took 45-107 ms for 1-16 rows, the output head (49152 x 576) 10-38 ms. Laid out
once by oneDNN (`torch.ops.mkldnn._reorder_linear_weight`) and multiplied by oneDNN
(`_linear_pointwise`), the same products took 32-46 ms and 6-9 ms (`docs/engines.md`). The layout is
made again only when the weight changes (after an optimizer step), so it is paid once per update.

Results equal `F.linear` up to float rounding: float32 sums in another order (~1e-4 on outputs of
magnitude ~20), bfloat16 bit for bit in the cases measured.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

# The rows oneDNN lays a weight out for: a decode step's. Prefills of hundreds of rows still ran at
# least as fast as MKL's with this layout (1.07-1.19x).
BATCH_HINT = 16


class PackedLinear(torch.nn.Module):
    """Stands in for an `nn.Linear` during an engine step: the same product from a pre-laid-out weight.

    `weight` and `bias` stay readable (peft's DoRA reads its base layer's; other code asks a layer for its
    weight's dtype or device); they are not registered parameters, so the model's parameter list does not change while the stand-in is in place.
    """

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, dtype: torch.dtype, *,
                 shown: torch.Tensor | None = None):
        """shown: the tensor `weight` reads as, when `weight` is a temporary (a LoRA layer's folded sum,
        shown as its base weight: the same shape, dtype and device)."""
        super().__init__()
        with torch.no_grad():
            self.packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach().to(dtype), BATCH_HINT)
            self.packed_bias = None if bias is None else bias.detach().to(dtype)
        object.__setattr__(self, "weight", weight if shown is None else shown)  # plain attributes: see above
        object.__setattr__(self, "bias", bias)
        self.in_features, self.out_features = weight.shape[1], weight.shape[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != self.packed.dtype:  # under autocast: what autocast does for F.linear
            x = x.to(self.packed.dtype)
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.packed_bias, "none", [], "")


@functools.cache
def packing_works(dtype: torch.dtype) -> bool:
    """Whether this torch build lays out and multiplies `dtype` weights with oneDNN, and gets F.linear's
    numbers (a build without oneDNN, or a CPU it does not support for the dtype, answers False)."""
    try:
        generator = torch.Generator().manual_seed(0)
        weight = torch.randn(24, 40, generator=generator).to(dtype)
        bias = torch.randn(24, generator=generator).to(dtype)
        x = torch.randn(3, 5, 40, generator=generator).to(dtype)
        got = PackedLinear(weight, bias, dtype)(x)
        expected = torch.nn.functional.linear(x, weight, bias)
        return got.shape == expected.shape and torch.allclose(got.float(), expected.float(), rtol=1e-2, atol=1e-2)
    except (RuntimeError, AttributeError, NotImplementedError):
        return False


def packable(weight: Any, dtype: Any) -> bool:
    """A weight the engine may run through a PackedLinear in `dtype` (None: the weight's own)."""
    if weight is None or weight.device.type != "cpu" or weight.dim() != 2:
        return False
    dtype = dtype or weight.dtype
    return dtype in (torch.float32, torch.bfloat16) and packing_works(dtype)
