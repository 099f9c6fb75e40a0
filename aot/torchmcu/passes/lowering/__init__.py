"""Lowering by op family: each module says, for its ops, what an ATen op
becomes in the logical graph, which instances have integer kernels, and
what program ops each logical node becomes. Adding an op touches its
family here, its reference twin (torchmcu/reference/<family>.py), its
kernels and their tests; see docs/architecture.md.
"""

from __future__ import annotations

from . import activations, attention_norm, conv, elementwise, pool_resize, recurrent, reduce, shape_views
from .family import Family, merge

FAMILIES: list[Family] = [conv.F, pool_resize.F, elementwise.F, reduce.F, shape_views.F, activations.F,
                          attention_norm.F, recurrent.F]

# Everything the families declare, in one table (a name declared twice is refused).
ALL: Family = merge(FAMILIES)
