"""The op table's delegates family (torchmcu/ops/__init__.py says what each field
means): delegate calls: a partition of the program run by an accelerator."""

from __future__ import annotations

from .row import Kernel, Op

OPS: tuple[Op, ...] = ()

KERNELS: tuple[Kernel, ...] = (
    Kernel("ETHOS_U", 35, "EthosUArgs", "EthosUParams", backends=("ethos-u",), reference=False,
           note=("An Ethos-U delegate call (firmware/delegates/ethos_u/): blob (U8 constant,",
                 "aot/torchmcu/backends/ethos_u/blob.py), scratch, fast scratch (U8 arena, or absent",
                 "when the blob needs none), then the partition's inputs; its outputs.")),
)
