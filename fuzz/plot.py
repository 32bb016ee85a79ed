"""``fuzz repro --plot``: where in the output a kernel is wrong, drawn over (row, column).

One figure for one case: the kernel's output error against the float64 oracle, relative to the
error model's bound, for the leading index with the worst error. Rows are queries, columns head-dim
columns; dashed lines mark the query tile edges (every 64 rows), and the side panel gives each row's
worst error with the rows that see the tail key tile (causal) shaded, so bad elements on a tile
edge, on the causal diagonal or in the last tile stand out. Needs matplotlib (the ``plot`` extra).
"""

from __future__ import annotations

import math

import torch

from oracle.dense import dense_attention
from properties import error_model as em
from properties.case import Case

BLOCK = 64


def output_error(kernel, case: Case, device) -> tuple[torch.Tensor, float, tuple[int, ...]]:
    """``|o - o64| / bound`` for the worst leading index, ``[n_q, d]``; the bound; that index."""
    q, k, v = case.make_qkv(device)
    with torch.no_grad():
        o = kernel.attention(q, k, v, case.is_causal)
        o64, _ = dense_attention(q, k, v, case.is_causal)
        o_ref, _ = dense_attention(q, k, v, case.is_causal, compute_dtype=None)
    bound, _ = em.error_bound(em.OUTPUT, o_ref, o64, dtype=q.dtype, **em.output_scales(q, k, v))
    err = (o.double() - o64).abs().cpu()
    err = torch.where(torch.isfinite(o.cpu()), err, torch.full_like(err, math.inf))
    flat = err.reshape(-1, case.n_q, case.head_dim)
    worst = int(flat.nan_to_num(posinf=1e300).amax(dim=(1, 2)).argmax()) if flat.shape[0] else 0
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst), tuple(case.leading))) \
        if case.leading else ()
    return flat[worst] / bound, bound, index


def plot_output_error(kernel, case: Case, path: str, *, device=None) -> str:
    """Draw the error of ``kernel``'s output on ``case`` into ``path`` (PNG); returns a summary."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SystemExit(
            "--plot needs matplotlib: pip install matplotlib (or the project's 'plot' extra: "
            "pip install -e '.[plot]')"
        ) from None
    from properties.oracle_agreement import default_device

    ratio, bound, index = output_error(kernel, case, device or default_device())
    shown = ratio.clamp(min=1e-3, max=1e3).nan_to_num(nan=1e3, posinf=1e3).log10().numpy()
    fig, (ax, side) = plt.subplots(1, 2, figsize=(10, 6), width_ratios=(3, 1), sharey=True,
                                   constrained_layout=True)
    image = ax.imshow(shown, aspect="auto", cmap="magma", vmin=-3, vmax=3, interpolation="nearest")
    fig.colorbar(image, ax=side, label="log10(error / bound): above 0 fails")
    for edge in range(BLOCK, case.n_q, BLOCK):
        ax.axhline(edge - 0.5, color="cyan", lw=0.6, ls="--")
        side.axhline(edge - 0.5, color="cyan", lw=0.6, ls="--")
    bad = (ratio > 1).nonzero()
    if 0 < len(bad) <= 400:  # ring a few bad elements; many show by colour alone
        ax.scatter(bad[:, 1], bad[:, 0], s=6, facecolors="none", edgecolors="lime", lw=0.5,
                   label=f"{len(bad)} elements over the bound")
        ax.legend(loc="lower right", fontsize=8)
    ax.set_xlabel("column (head dim)")
    ax.set_ylabel("row (query)")
    ax.set_title(f"output error, leading index {index}", fontsize=10)
    rows = ratio.nan_to_num(posinf=1e3).amax(dim=1).clamp(min=1e-3).numpy()
    side.semilogx(rows, range(case.n_q), lw=0.8, color="black")
    side.axvline(1.0, color="red", lw=0.8)
    tail = (case.n_k - 1) // BLOCK * BLOCK
    if case.is_causal and tail < case.n_q:
        side.axhspan(tail - 0.5, case.n_q - 0.5, color="orange", alpha=0.2,
                     label=f"rows that see the last key tile (keys >= {tail})")
        side.legend(loc="upper left", fontsize=7)
    side.set_xlabel("worst error / bound, per row")
    fig.suptitle(f"{kernel.__name__}  n_q={case.n_q} n_k={case.n_k} d={case.head_dim} "
                 f"{case.dtype} causal={case.is_causal} {case.layout} {case.distribution}\n"
                 f"bound {bound:.3e}; n_k mod {BLOCK} = {case.n_k % BLOCK}", fontsize=9)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    worst_row = int(rows.argmax())
    return (f"plot written to {path}: worst error {float(ratio.nan_to_num(posinf=math.inf).max()):.3g} "
            f"x bound at leading index {index}, row {worst_row}; "
            f"{int((ratio > 1).sum())} of {ratio.numel()} elements over the bound")
