"""CMSIS-NN's own unit-test vectors (Tests/UnitTest/TestCases/TestData/<set>/
of the user's CMSIS-NN tree, $TORCHMCU_CMSIS_NN_DIR), read at test time:
nothing of them is copied into this repository.

Each set is a folder of C headers that TFLite's reference generated:
config_data.h's `#define <SET>_<NAME> value` (shapes, strides, paddings,
offsets, activation range; per-tensor multiplier and shift for some fully
connected sets) and one `const <int type> <set>_<name>[n] = {...};` per
tensor (input, weights, biases, output_mult, output_shift, output_ref),
some of them aliases (`= other;`) or NULL (no bias). test_data.h includes
the headers of the set's current format (older formats' headers sit beside
them with the same names: only the included ones count). Which kernel a set
is for is read from the test programs that include it
(TestCases/test_arm_<kernel>/*.c)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

_INCLUDE = re.compile(r'#include\s+"([^"]+)"')
_DEFINE = re.compile(r"^#define\s+(\w+)\s+(\S+)\s*$", re.M)
_ARRAY = re.compile(r"const\s+(u?int(?:8|16|32|64)_t)\s+(\w+)\s*\[\s*(\d*)\s*\]\s*=\s*\{([^}]*)\}\s*;", re.S)
_ALIAS = re.compile(r"const\s+(u?int(?:8|16|32|64)_t)\s*\*\s*(?:const\s+)?(\w+)\s*=\s*(\w+)\s*;")
_TEST_SET = re.compile(r'#include\s+"\.\./TestData/(\w+)/test_data\.h"')


@dataclass
class VectorSet:
    """One TestData folder: `config` the defines and `arrays` the tensors, both
    by name without the set's prefix (`INPUT_W`, `output_ref`); None for a
    NULL tensor."""

    name: str
    config: dict[str, int | str]
    arrays: dict[str, np.ndarray | None]
    ctypes: dict[str, str]  # each tensor's declared element type ("int32_t"), NULL ones too

    def get(self, key: str, default: int | None = None) -> int:
        value = self.config.get(key, default)
        if value is None:
            raise KeyError(f"{self.name}: no {key} in config_data.h")
        return int(value)


def test_data_dir(root: Path) -> Path:
    return root / "Tests" / "UnitTest" / "TestCases" / "TestData"


def sets_of(root: Path, kernel_test: str) -> list[str]:
    """The vector sets the CMSIS-NN test program test_arm_<kernel> runs."""
    folder = root / "Tests" / "UnitTest" / "TestCases" / kernel_test
    names: list[str] = []
    for source in sorted(folder.glob("*.c")):
        for name in _TEST_SET.findall(source.read_text()):
            if name not in names:
                names.append(name)
    return names


def _value(text: str) -> int | str:
    try:
        return int(text, 0)
    except ValueError:
        return text


def load(root: Path, name: str) -> VectorSet:
    folder = test_data_dir(root) / name
    headers = _INCLUDE.findall((folder / "test_data.h").read_text())
    text = "\n".join((folder / h).read_text() for h in headers)
    prefix = name.upper() + "_"
    config = {k[len(prefix):]: _value(v) for k, v in _DEFINE.findall(text) if k.startswith(prefix)}
    arrays: dict[str, np.ndarray | None] = {}
    ctypes: dict[str, str] = {}
    lower = name + "_"
    for ctype, var, _, body in _ARRAY.findall(text):
        ctypes[var.removeprefix(lower)] = ctype
        values = [int(v, 0) for v in body.replace("\n", " ").split(",") if v.strip()]
        # As C converts them: the packed int4 sets write bytes above 127 into int8_t arrays.
        arrays[var.removeprefix(lower)] = np.array(values, np.int64).astype(ctype.removesuffix("_t"))
    # Aliases (`a = b;`) and NULLs, in order: an alias may name an earlier alias.
    for ctype, var, target in _ALIAS.findall(text):
        arrays[var.removeprefix(lower)] = None if target == "NULL" else arrays[target.removeprefix(lower)]
        ctypes[var.removeprefix(lower)] = ctype
    return VectorSet(name, config, arrays, ctypes)
