"""The kernel table of a selective build: a `const` array indexed by op
code with the kernels a program uses (the others null, so their code is
never linked), from the backends' kernel folders."""

from __future__ import annotations

import json
from pathlib import Path

from .. import backends
from ..program.kernel_table import declared_kernels, table_source
from ..program.serialize import DEFAULT_SYMBOL


def kernel_sets() -> list[str]:
    """The names `torchmcu build --kernels` takes."""
    return [b.kernel_set for b in backends.builds().values() if b.kernel_set]


def _folder(kernels: str) -> str:
    try:
        folder = backends.by_kernel_set(kernels).kernel_dir
    except KeyError:
        raise ValueError(f"unknown kernel set {kernels!r}; one of {', '.join(kernel_sets())}") from None
    assert folder is not None
    return folder


def available_kernels(kernels: str = "portable") -> list[str]:
    """Op codes whose kernel this runtime provides in a kernel set."""
    return declared_kernels(_folder(kernels))


def delegate_codes() -> dict[str, str]:
    """The op codes of delegate calls, and the firmware folder of each delegate."""
    return {b.delegate_code: b.kernel_dir for b in backends.builds().values()
            if b.delegate_code and b.kernel_dir}


def kernel_table_source(codes: list[str] | None, kernels: str = "portable") -> str:
    """The kernel table: only the listed op codes (None: every portable one).
    With another kernel set (e.g. "cmsis-nn"), op codes that have a kernel in
    it use it (cmsis_nn::kX) and the others the portable one; a delegate's
    op code uses the delegate's entry (ethos_u::kEthosU), which only a build
    with the delegate's driver links (its build_parts)."""
    return table_source(codes, None if kernels == "portable" else _folder(kernels), list(delegate_codes().values()))


def shared_kernel_table(dirs: list[str | Path], kernels: str = "portable") -> tuple[str, list[str]]:
    """One kernel table for several compiled models in one firmware: the
    union of their op codes (each model's kernels.txt). Models that link
    together need distinct symbols (compile --symbol)."""
    codes: set[str] = set()
    symbols: dict[str, Path] = {}
    for d in map(Path, dirs):
        listing, meta = d / "kernels.txt", d / "model.json"
        if not listing.is_file() or not meta.is_file():
            raise ValueError(f"{d} is not a compiled model (no kernels.txt / model.json); run `torchmcu compile`")
        symbol = json.loads(meta.read_text()).get("symbol", DEFAULT_SYMBOL)
        if symbol in symbols:
            raise ValueError(f"{symbols[symbol]} and {d} both name their arrays tmcu_{symbol}_*: compile one "
                             "of them again with its own --symbol")
        symbols[symbol] = d
        codes |= {line.strip() for line in listing.read_text().splitlines() if line.strip()}
    missing = sorted(c for c in codes if c not in delegate_codes() and c not in available_kernels())
    if missing:
        raise ValueError(f"no kernel for {', '.join(missing)} in this runtime")
    ordered = sorted(codes)
    return kernel_table_source(ordered, kernels), ordered
