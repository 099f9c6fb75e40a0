"""Each program op as TFLite operators, by op family (the families of
torchmcu.passes.lowering): one mixin class a module, combined with the core
in export.py. A method op_<code> exports the op code <CODE>."""

from .attention_norm import AttentionNormOps
from .conv import ConvOps
from .elementwise import ElementwiseOps
from .pool_resize import PoolResizeOps
from .recurrent import RecurrentOps
from .reduce import ReduceOps
from .shape_views import ShapeViewsOps

__all__ = ["AttentionNormOps", "ConvOps", "ElementwiseOps", "PoolResizeOps", "RecurrentOps", "ReduceOps",
           "ShapeViewsOps"]
