"""``--plot``: the memory plan as a picture, tensor lifetimes against arena offsets.

Each planned tensor is a rectangle: horizontally the kernel calls it is live for, vertically
the bytes of the arena it occupies. A horizontal line marks the planned arena, a dashed one
the live-tensor lower bound.
"""

from __future__ import annotations

import io

from cortex_m_nn.plan.memory_plan import MemoryPlan

COLOURS = {"input": "#4c72b0", "activation": "#55a868", "scratch": "#dd8452", "output": "#8172b3"}


def render(plan: MemoryPlan, title: str, image_format: str = "png") -> bytes:
    """The plan as an image file's bytes (``png``, ``svg``, ``pdf``, … as matplotlib writes)."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    calls = max(len(plan.operators), 1)
    figure, axes = plt.subplots(figsize=(max(6.0, 0.45 * calls + 2), 5.0))
    for tensor in plan.tensors:
        if tensor.nbytes == 0:
            continue
        axes.add_patch(
            Rectangle(
                (tensor.first - 0.45, tensor.offset),
                tensor.last - tensor.first + 0.9,
                tensor.nbytes,
                facecolor=COLOURS[tensor.kind],
                edgecolor="black",
                linewidth=0.5,
                alpha=0.85,
            )
        )
    axes.axhline(plan.arena_bytes, color="black", linewidth=1.0)
    axes.axhline(plan.lower_bound_bytes, color="black", linewidth=1.0, linestyle="--")
    axes.set_xlim(-0.6, calls - 0.4)
    axes.set_ylim(0, max(plan.arena_bytes, plan.lower_bound_bytes, 1) * 1.08)
    axes.set_xticks(range(len(plan.operators)))
    axes.set_xticklabels(
        [f"{i + 1} {name.split('::')[-1]}" for i, name in enumerate(plan.operators)],
        rotation=60,
        ha="right",
        fontsize=7,
    )
    axes.set_ylabel("arena offset (bytes)")
    axes.set_title(
        f"{title}: arena {plan.arena_bytes:,} B, live-tensor bound {plan.lower_bound_bytes:,} B",
        fontsize=10,
    )
    handles = [Patch(facecolor=c, edgecolor="black", label=k) for k, c in COLOURS.items()]
    axes.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format=image_format, dpi=120)
    plt.close(figure)
    return buffer.getvalue()
