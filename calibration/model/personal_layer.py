"""One personalised layer, (W + U[a]) . [1; x] for every (model, row), as a single autograd node.

The network (calibration/model/network.py) applies the judge offsets U by grouping the rows by their
(model, judge) pair, padded to the largest group, and multiplying each group by its own offset matrix:
S ~ models x judges tiny products a layer. Written with autograd's own operations that was ~25 kernels a
layer and a step spent most of its time in their overhead: PyTorch's CPU bmm pays a tensor view and a
dispatch per matrix of the batch, where numpy's matmul loops over the stack in C (about 2x faster at
these shapes, measured in README "Scaling"), and the backward of the row gathers was a scatter-add where
each row sits in exactly one place of the groups, so a plain gather does. The bias row of W and U is
added instead of a column of ones being concatenated to x, which saves a copy of x per layer.
"""

from __future__ import annotations

import numpy as np
import torch


class Groups:
    """Where each row sits when the rows are grouped by (model, judge) pair: S pairs, each padded to C rows.

    slot_row (S*C,): the row (of the M*B flattened rows) in each place; padding places hold row 0, whose
    values there are never read back (their outputs are dropped and their gradients are zero).
    row_slot (M*B,): the place of each row. known (M*B,) float or None: 0 for rows of no judge (population),
    which get the shared weights only; None when every row has a judge.
    """

    def __init__(self, slot: torch.Tensor, n_slots: int, known: torch.Tensor | None):
        n_rows = len(slot)
        order = torch.argsort(slot, stable=True)  # rows sorted by pair
        sorted_slot = slot[order]
        position = torch.arange(n_rows)
        starts = torch.ones_like(sorted_slot, dtype=torch.bool)
        starts[1:] = sorted_slot[1:] != sorted_slot[:-1]
        group_start = torch.cummax(torch.where(starts, position, torch.zeros_like(position)), dim=0).values
        rank = position - group_start  # place of each sorted row within its group
        self.size = int(rank.max()) + 1 if n_rows else 1
        place = sorted_slot * self.size + rank
        self.n_slots = n_slots
        self.slot_row = torch.zeros(n_slots * self.size, dtype=torch.long).scatter_(0, place, order)
        self.row_slot = torch.empty_like(slot).scatter_(0, order, place)
        self.known = known


def personal_layer(x: torch.Tensor, W: torch.Tensor, u: torch.Tensor | None, groups: Groups | None) -> torch.Tensor:
    """(M, B, In) -> (M, B, Out): x . W[:, 1:] + W[:, 0], plus each row's pair's x . u[s, 1:] + u[s, 0].

    W: (M, In+1, Out) shared weights; u: (S, In+1, Out) the offsets of the batch's S pairs (None: shared only).
    """
    return _PersonalLayer.apply(x, W, u, groups)


class _PersonalLayer(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, W, u, groups):
        xn, Wn = _np(x), _np(W)
        out = np.matmul(xn, Wn[:, 1:])  # (M, B, Out)
        out += Wn[:, :1]
        grouped = None
        if u is not None:
            un = _np(u)
            grouped = _grouped_with_ones(xn.reshape(-1, xn.shape[-1]), groups)  # (S, C, In+1)
            by_place = np.matmul(grouped, un)  # (S, C, Out)
            offset = np.take(by_place.reshape(-1, out.shape[-1]), groups.row_slot.numpy(), axis=0)  # (M*B, Out)
            if groups.known is not None:
                offset *= groups.known.numpy()[:, None]
            out += offset.reshape(out.shape)
        ctx.save_for_backward(x, W, u)
        ctx.groups, ctx.grouped = groups, grouped
        return torch.from_numpy(out)

    @staticmethod
    def backward(ctx, grad):
        x, W, u = ctx.saved_tensors
        groups, grouped = ctx.groups, ctx.grouped
        g = _np(grad.contiguous())  # (M, B, Out)
        need_x, need_W, need_u = ctx.needs_input_grad[:3]
        gx = gW = gu = None
        if need_W:
            gW = _with_bias_row(g, _np(x))
        if need_x:
            gx = np.matmul(g, _np(W)[:, 1:].transpose(0, 2, 1))  # (M, B, In)
        if u is not None and (need_u or need_x):
            g_rows = g.reshape(-1, g.shape[-1])
            if groups.known is not None:
                g_rows = g_rows * groups.known.numpy()[:, None]
            g_by_place = np.zeros((groups.n_slots * groups.size, g.shape[-1]), dtype=g.dtype)
            g_by_place[groups.row_slot.numpy()] = g_rows  # padding places stay 0
            g_by_place = g_by_place.reshape(groups.n_slots, groups.size, -1)  # (S, C, Out)
            if need_u:
                gu = np.matmul(grouped.transpose(0, 2, 1), g_by_place)  # (S, In+1, Out)
            if need_x:
                g_places = np.matmul(g_by_place, _np(u)[:, 1:].transpose(0, 2, 1)).reshape(-1, gx.shape[-1])
                gx += np.take(g_places, groups.row_slot.numpy(), axis=0).reshape(gx.shape)
        return *(None if a is None else torch.from_numpy(a) for a in (gx, gW, gu)), None


def _with_bias_row(g: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The gradient of a weight stack (N, In+1, Out) from its output's (N, R, Out) and input's (N, R, In):
    the bias row (the sum over rows) first, then x^T g. (numpy's matmul into a strided `out=` view falls
    back to a slow loop: the product is written fresh and concatenated.)"""
    bias = torch.from_numpy(g).sum(dim=1, keepdim=True).numpy()  # torch reduces over a middle axis ~5x faster
    return np.concatenate([bias, np.matmul(x.transpose(0, 2, 1), g)], axis=1)


def _grouped_with_ones(rows: np.ndarray, groups: Groups) -> np.ndarray:
    """(S, C, In+1): [1; x] of the row in every place of the groups, so one product with u (S, In+1, Out)
    adds the bias row too, and the gradient of u is one product as well."""
    out = np.empty((groups.n_slots * groups.size, rows.shape[1] + 1), dtype=rows.dtype)
    out[:, 0] = 1.0
    out[:, 1:] = np.take(rows, groups.slot_row.numpy(), axis=0)
    return out.reshape(groups.n_slots, groups.size, -1)


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().numpy()
