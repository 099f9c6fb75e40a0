"""torchvision's and torchaudio's model definitions beside a CPU-only PyTorch.

The torchvision and torchaudio wheels that match torch 2.13.0 on PyPI are
CUDA builds: their compiled operators (torchvision's nms, torchaudio's
_torchaudio library) cannot load against the CPU torch. The model
definitions need none of them, but the imports fail:

- torchvision registers fake (meta) kernels for `torchvision::nms` and
  `qnms` whether or not its library loaded, and that registration raises
  "operator torchvision::nms does not exist";
- torchaudio's `_extension` package re-raises the library's load error.

    from torchmcu.frontend.compat import import_torchaudio, import_torchvision
    tv = import_torchvision()        # then tv.models.mobilenet_v2(width_mult=0.35)
    ta = import_torchaudio()         # then ta.models.Conformer(...)

Each first tries the plain import; only when it fails for that reason does it
declare the two operator schemas (torchvision) or stand in for the
extension (torchaudio), and import again. The compiled operators stay
unavailable (torchvision.ops.nms raises torchvision's own error; so do
torchaudio's forced alignment and CTC decoders); nothing a model definition
uses needs them.
"""

from __future__ import annotations

import sys
import types
from typing import Any

_LIBRARIES: list[Any] = []  # torch.library.Library objects: they unregister when collected


def _forget(prefix: str) -> None:
    for name in [m for m in sys.modules if m == prefix or m.startswith(prefix + ".")]:
        del sys.modules[name]


def import_torchvision() -> Any:
    """torchvision, importable beside a CPU-only torch."""
    try:
        import torchvision
        return torchvision
    except RuntimeError as e:
        if "torchvision::nms" not in str(e):
            raise
    import torch

    _forget("torchvision")
    lib = torch.library.Library("torchvision", "DEF")  # the schemas torchvision's fake kernels are for
    lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _LIBRARIES.append(lib)
    import torchvision
    return torchvision


def import_torchaudio() -> Any:
    """torchaudio, importable beside a CPU-only torch."""
    try:
        import torchaudio
        return torchaudio
    except OSError:
        pass
    _forget("torchaudio")
    ext = types.ModuleType("torchaudio._extension")
    ext._IS_TORCHAUDIO_EXT_AVAILABLE = False  # type: ignore[attr-defined]
    ext._IS_ALIGN_AVAILABLE = False  # type: ignore[attr-defined]

    def fail_if_no_align(fn: Any) -> Any:
        def unavailable(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError(f"{fn.__name__} needs torchaudio's compiled extension, which does not load here")
        return unavailable

    ext.fail_if_no_align = fail_if_no_align  # type: ignore[attr-defined]
    ext._check_cuda_version = lambda: None  # type: ignore[attr-defined]
    sys.modules["torchaudio._extension"] = ext
    import torchaudio
    return torchaudio
