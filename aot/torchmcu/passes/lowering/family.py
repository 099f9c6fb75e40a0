"""What an op family declares, so that adding an op touches its family only.

A family module (conv.py, pool_resize.py, ...) makes one `Family` and
registers on it, with decorators:

- `rule(*aten_targets)`: an ATen op to logical nodes. The function gets the
  converter (torchmcu.passes.convert.Converter) and the op's arguments, with
  activations as `Act` ids and constants as arrays, and returns the value.
- `lower(*ops)` / `lower16(*ops)`: a logical node to program ops. The
  function gets the layout (torchmcu.passes.layout.Layout) and the node.
  `ops` are logical op names: "conv2d" for float, "qconv2d" for the int8
  op that fusion.fold_qdq makes of dequantize -> conv2d -> quantize;
  `lower16` registers the int16 (a16w8) form of a "q" op.
- `int8(*ops, shared=False)` / `int16(*ops, shared=False)`: whether an
  integer kernel implements this instance of the op, given its input and
  output quantization (else it stays float between dequantize and
  quantize). `shared` ops move bytes without requantizing: their inputs
  and output must share one quantization, which is checked before the
  predicate runs.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ... import ops

# (graph, node, input quantizations, output quantization) -> supported
Supported = Callable[[Any, Any, list[tuple[float, int]], tuple[float, int]], bool]


@dataclass
class Family:
    name: str
    rules: dict[Any, Callable[..., Any]] = field(default_factory=dict)
    emitters: dict[str, Callable[[Any, Any], None]] = field(default_factory=dict)
    emitters16: dict[str, Callable[[Any, Any], None]] = field(default_factory=dict)
    int8_ops: dict[str, tuple[Supported, bool]] = field(default_factory=dict)  # op -> (predicate, shared)
    int16_ops: dict[str, tuple[Supported, bool]] = field(default_factory=dict)

    def rule(self, *targets: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            for t in targets:
                self.rules[t] = fn
            return fn
        return register

    def lower(self, *ops: str) -> Callable[[Callable[[Any, Any], None]], Callable[[Any, Any], None]]:
        return self._register(self.emitters, ops)

    def lower16(self, *ops: str) -> Callable[[Callable[[Any, Any], None]], Callable[[Any, Any], None]]:
        return self._register(self.emitters16, ops)

    def int8(self, *ops: str, shared: bool = False) -> Callable[[Supported], Supported]:
        def register(fn: Supported) -> Supported:
            for op in ops:
                self.int8_ops[op] = (fn, shared)
            return fn
        return register

    def int16(self, *ops: str, shared: bool = False) -> Callable[[Supported], Supported]:
        def register(fn: Supported) -> Supported:
            for op in ops:
                self.int16_ops[op] = (fn, shared)
            return fn
        return register

    @staticmethod
    def _register(table: dict[str, Any], ops: tuple[str, ...]) -> Callable[[Any], Any]:
        def register(fn: Any) -> Any:
            for op in ops:
                table[op] = fn
            return fn
        return register


def always(g: Any, n: Any, in_q: list[tuple[float, int]], out_q: tuple[float, int]) -> bool:
    """An integer kernel covers every instance."""
    return True


def merge(families: list[Family]) -> Family:
    """One table of everything the families declare; a name declared twice is a bug."""
    out = Family("all")
    for f in families:
        for table in ("rules", "emitters", "emitters16", "int8_ops", "int16_ops"):
            mine, theirs = getattr(out, table), getattr(f, table)
            twice = set(mine) & set(theirs)
            if twice:
                raise AssertionError(f"family {f.name} declares {sorted(map(str, twice))} again ({table})")
            mine.update(theirs)
    return out


# With TORCHMCU_CHECK_TABLE=1 (the test suite sets it) every rule and every
# emitter is held to the op table (torchmcu/ops/): a rule may emit only the
# logical ops whose rows list its ATen target, an emitter only the program
# ops its op's row names for that precision (and the layout's own PERMUTE
# and COPY). What the table says an op becomes is then what it becomes.
def checking_table() -> bool:
    return bool(os.environ.get("TORCHMCU_CHECK_TABLE"))


def _disagree(message: str) -> None:
    """TORCHMCU_CHECK_TABLE=1: an error; =log:FILE: a line appended to FILE
    (to list every disagreement of a whole test run at once)."""
    mode = os.environ.get("TORCHMCU_CHECK_TABLE", "")
    if mode.startswith("log:"):
        with open(mode[4:], "a") as f:
            f.write(message + "\n")
        return
    raise AssertionError(message)


def check_rule(target: Any, nodes: list[Any]) -> None:
    allowed = ops.EMITS.get(str(target), frozenset())
    for n in nodes:
        if n.op not in allowed:
            _disagree(f"op table: the rule for {target} emitted logical op {n.op!r}, but no Op row in "
                      f"torchmcu/ops/ lists {target} for it (rows listing it: {sorted(allowed)})")


def check_emitted(node: Any, codes: list[str]) -> None:
    bits = node.attrs.get("bits")
    allowed = ops.becomes(node.op, bits) | ops.LAYOUT_CODES
    for code in codes:
        if code not in allowed:
            _disagree(f"op table: logical op {node.op!r}{' (int16)' if bits == 16 else ''} became "
                      f"{code}, which its Op row in torchmcu/ops/ does not name ({sorted(allowed)})")
