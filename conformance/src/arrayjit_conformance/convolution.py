"""Convolutions and pooling as arrayjit specs, and the same computations in plain numpy.

Layout is channels-last with any number of spatial axes: an input ``x`` of shape ``(batch,
*spatial, channels)``, weights ``w`` of ``(*kernel, channels, out_channels)``, a result ``y`` of
``(batch, *out, out_channels)``. A :class:`ConvShape` holds the sizes, strides, dilations and
paddings; it writes the specs (:meth:`ConvShape.forward_spec` ``"b(2*o+k-1)c,kcd->bod"`` and
the two gradients) and the numpy references compute the same thing the plain way, one kernel
offset at a time over a padded copy (no arrayjit code runs in them).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

OUT_LETTERS = "opq"
KERNEL_LETTERS = "klm"


def _term(coeff: int, letter: str) -> str:
    return letter if coeff == 1 else f"{coeff}*{letter}"


def affine(stride: int, out: str, dilation: int, kernel: str, offset: int) -> str:
    """The text of ``stride*out + dilation*kernel + offset``, parenthesized."""
    text = f"{_term(stride, out)}+{_term(dilation, kernel)}"
    if offset:
        text += f"{offset:+d}"
    return f"({text})"


@dataclass(frozen=True)
class ConvShape:
    """A convolution (or pooling window) over ``len(spatial)`` axes."""

    batch: int
    spatial: tuple[int, ...]
    channels: int
    out_channels: int
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    dilation: tuple[int, ...]
    pads: tuple[tuple[int, int], ...]

    @property
    def rank(self) -> int:
        return len(self.spatial)

    @property
    def out(self) -> tuple[int, ...]:
        """The output's spatial sizes (0 where no window fits)."""
        return tuple(
            max(0, (n + lo + hi - d * (k - 1) - 1) // s + 1)
            for n, k, s, d, (lo, hi) in zip(
                self.spatial, self.kernel, self.stride, self.dilation, self.pads
            )
        )

    @property
    def x_dims(self) -> tuple[int, ...]:
        return (self.batch, *self.spatial, self.channels)

    @property
    def w_dims(self) -> tuple[int, ...]:
        return (*self.kernel, self.channels, self.out_channels)

    @property
    def y_dims(self) -> tuple[int, ...]:
        return (self.batch, *self.out, self.out_channels)

    @property
    def pool_dims(self) -> tuple[int, ...]:
        return (self.batch, *self.out, self.channels)

    @property
    def padding_axes(self) -> tuple[tuple[int, int], ...]:
        """The input's ``Padding`` axes."""
        return ((0, 0), *self.pads, (0, 0))

    def _windows(self) -> str:
        return "".join(
            affine(s, o, d, k, -lo)
            for s, o, d, k, (lo, _) in zip(
                self.stride, OUT_LETTERS, self.dilation, KERNEL_LETTERS, self.pads
            )
        )

    def _outs(self) -> str:
        return OUT_LETTERS[: self.rank]

    def _kernels(self) -> str:
        return KERNEL_LETTERS[: self.rank]

    def forward_spec(self) -> str:
        """``y =+ x * w``: e.g. ``"b(2*o+k-1)c,kcd->bod"``."""
        return f"b{self._windows()}c,{self._kernels()}cd->b{self._outs()}d"

    def input_grad_spec(self) -> str:
        """``dx =+ dy * w``: the forward spec with the result indexed by the window."""
        return f"b{self._outs()}d,{self._kernels()}cd->b{self._windows()}c"

    def weight_grad_spec(self) -> str:
        """``dw =+ x * dy``."""
        return f"b{self._windows()}c,b{self._outs()}d->{self._kernels()}cd"

    def pool_spec(self) -> str:
        """A pooling window per channel: ``y =max x``."""
        return f"b{self._windows()}c->b{self._outs()}c"

    def pool_sizes(self) -> dict[str, int]:
        """The window's letters and sizes (they appear only inside expressions)."""
        return dict(zip(self._kernels(), self.kernel))


def pad(x: np.ndarray, shape: ConvShape, value: float = 0.0) -> np.ndarray:
    """``x`` with the shape's margins around its spatial axes, holding ``value``."""
    return np.pad(x, shape.padding_axes, constant_values=value)


def _window(shape: ConvShape, offset: tuple[int, ...]) -> tuple[slice, ...]:
    """The cells of the padded input that kernel offset ``offset`` reads, one per output
    position (batch and channel axes whole)."""
    spatial = tuple(
        slice(d * k, d * k + s * (o - 1) + 1, s) if o > 0 else slice(0, 0)
        for k, s, d, o in zip(offset, shape.stride, shape.dilation, shape.out)
    )
    return (slice(None), *spatial, slice(None))


def conv_numpy(x: np.ndarray, w: np.ndarray, shape: ConvShape) -> np.ndarray:
    """``y[b, o, d] = sum_{k, c} xpad[b, s*o + d*k, c] * w[k, c, d]`` (zero padding), one
    kernel offset at a time."""
    xp = pad(np.asarray(x, np.float64), shape)
    y = np.zeros(shape.y_dims)
    for offset in itertools.product(*(range(k) for k in shape.kernel)):
        y += np.tensordot(xp[_window(shape, offset)], w[offset], axes=([-1], [0]))
    return y


def conv_input_grad_numpy(dy: np.ndarray, w: np.ndarray, shape: ConvShape) -> np.ndarray:
    """The gradient of ``sum(y * dy)`` with respect to ``x`` (the margins' share dropped)."""
    dxp = np.zeros(pad(np.zeros(shape.x_dims), shape).shape)
    for offset in itertools.product(*(range(k) for k in shape.kernel)):
        dxp[_window(shape, offset)] += np.tensordot(dy, w[offset], axes=([-1], [-1]))
    logical = tuple(slice(lo, lo + n) for (lo, _), n in zip(shape.pads, shape.spatial))
    return dxp[(slice(None), *logical, slice(None))]


def conv_weight_grad_numpy(x: np.ndarray, dy: np.ndarray, shape: ConvShape) -> np.ndarray:
    """The gradient of ``sum(y * dy)`` with respect to ``w``."""
    xp = pad(np.asarray(x, np.float64), shape)
    dw = np.zeros(shape.w_dims)
    axes = list(range(shape.rank + 1))
    for offset in itertools.product(*(range(k) for k in shape.kernel)):
        dw[offset] = np.tensordot(xp[_window(shape, offset)], dy, axes=(axes, axes))
    return dw


def pool_numpy(x: np.ndarray, shape: ConvShape, margin: float) -> np.ndarray:
    """Max pooling: ``y[b, o, c] = max_k xpad[b, s*o + d*k, c]`` with margins ``margin``; an
    empty window gives -inf."""
    xp = pad(np.asarray(x, np.float64), shape, margin)
    y = np.full(shape.pool_dims, -np.inf)
    for offset in itertools.product(*(range(k) for k in shape.kernel)):
        y = np.maximum(y, xp[_window(shape, offset)])
    return y


def im2col_conv_numpy(x: np.ndarray, w: np.ndarray, shape: ConvShape) -> np.ndarray:
    """The forward convolution the way numpy users make it fast: the windows gathered into one
    matrix (im2col, through ``sliding_window_view``), then one matmul. Stride and dilation 1
    only (the benchmarks' case)."""
    assert all(s == 1 for s in shape.stride) and all(d == 1 for d in shape.dilation)
    xp = pad(x, shape)
    axes = tuple(range(1, shape.rank + 1))
    windows = np.lib.stride_tricks.sliding_window_view(xp, shape.kernel, axis=axes)
    # (batch, *out, channels, *kernel) -> (batch * prod(out), prod(kernel) * channels)
    order = (0, *axes, *range(shape.rank + 2, 2 * shape.rank + 2), shape.rank + 1)
    cols = windows.transpose(order).reshape(-1, int(np.prod(shape.kernel)) * shape.channels)
    return (cols @ w.reshape(-1, shape.out_channels)).reshape(shape.y_dims)


__all__ = [
    "ConvShape",
    "affine",
    "conv_input_grad_numpy",
    "conv_numpy",
    "conv_weight_grad_numpy",
    "im2col_conv_numpy",
    "pad",
    "pool_numpy",
]
