"""profile.png: each op's instructions and cycles, in program order (as
memory_plan.png, matplotlib when installed; TORCHMCU_PLOT=0 skips it)."""

from __future__ import annotations

import io
import os
import textwrap
from typing import Any


def render_profile(ops: list[dict[str, Any]], title: str) -> bytes | None:
    """`ops`: in program order, each with name, kind, instructions and (when
    the cycle model ran) cycles and cycles_with_wait_states."""
    if os.environ.get("TORCHMCU_PLOT", "1") == "0" or not ops:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    n = len(ops)
    fig, ax = plt.subplots(figsize=(max(8.0, 0.28 * n + 3), 4.8))
    xs = list(range(n))
    have_cycles = any(o.get("cycles") is not None for o in ops)
    width = 0.4 if have_cycles else 0.8
    ax.bar([x - width / 2 if have_cycles else x for x in xs], [o.get("instructions") or 0 for o in ops], width,
           label="instructions (QEMU -icount)", color="tab:blue")
    if have_cycles:
        ax.bar([x + width / 2 for x in xs], [o.get("cycles") or 0 for o in ops], width,
               label="cycles, zero wait states (estimate)", color="tab:orange")
        wait = [(o.get("cycles_with_wait_states") or 0) - (o.get("cycles") or 0) for o in ops]
        if any(w > 0 for w in wait):
            ax.bar([x + width / 2 for x in xs], wait, width, bottom=[o.get("cycles") or 0 for o in ops],
                   label="+ the board's wait states (estimate)", color="tab:red", alpha=0.6)
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{i} {o['name'][:16]}" for i, o in enumerate(ops)], rotation=90, fontsize=6)
    ax.set_ylabel("per op")
    ax.set_title("\n".join(textwrap.wrap(title, 100)), fontsize=8)
    ax.legend(fontsize=7)
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, dpi=110, format="png")
    plt.close(fig)
    return png.getvalue()
