"""The conv family's portable kernels, written against `self.xp`.

conv2d's whole-batch im2col paths (forward and its two adjoints, for small convolutions),
im2col/col2im over a block of output rows (the blocked path's columns), a gemm into a given,
possibly strided, output, and the Winograd tile transforms, which have no portable form
here: `winograd_available()` is False and conv2d takes im2col.
"""

from __future__ import annotations

from .base import into


class ConvGeometry:
    """One conv's window geometry: input [C, H, W], top/left padding, output width, kernel,
    stride, dilation (the bottom/right padding only shows in which taps read zeros)."""

    __slots__ = ("C", "H", "W", "pt", "pl", "ow", "kh", "kw", "sh", "sw", "dh", "dw")

    def __init__(self, C, H, W, pt, pl, ow, kh, kw, stride, dilation) -> None:
        self.C, self.H, self.W, self.pt, self.pl, self.ow = C, H, W, pt, pl, ow
        self.kh, self.kw = kh, kw
        (self.sh, self.sw), (self.dh, self.dw) = stride, dilation

    def args(self, oy0: int, oy1: int) -> tuple:
        return (self.C, self.H, self.W, self.pt, self.pl, oy0, oy1, self.ow, self.kh,
                self.kw, self.sh, self.sw, self.dh, self.dw)

    def check(self, images, cols, oy0: int, oy1: int) -> None:
        """Raise unless images are [n, C, H, W] and cols [C*kh*kw, n*(oy1-oy0)*ow]: the
        compiled loops trust these sizes."""
        n = images.shape[0]
        if (images.shape[1:] != (self.C, self.H, self.W) or not 0 <= oy0 <= oy1
                or cols.shape != (self.C * self.kh * self.kw, n * (oy1 - oy0) * self.ow)):
            raise ValueError(f"conv kernels: images {images.shape} and columns {cols.shape} "
                             f"do not fit the geometry (rows {oy0}..{oy1})")

    def _taps(self, oy0: int, oy1: int):
        """For each tap (i, j): the rows and columns of the padded image it reads, and the
        padding (top, bottom, left, right) that covers every read."""
        rows, ow = oy1 - oy0, self.ow
        bottom = max(0, (oy1 - 1) * self.sh - self.pt + (self.kh - 1) * self.dh - self.H + 1)
        right = max(0, (ow - 1) * self.sw - self.pl + (self.kw - 1) * self.dw - self.W + 1)
        taps = []
        for i in range(self.kh):
            r = oy0 * self.sh + i * self.dh
            for j in range(self.kw):
                c = j * self.dw
                taps.append((slice(r, r + (rows - 1) * self.sh + 1, self.sh),
                             slice(c, c + (ow - 1) * self.sw + 1, self.sw)))
        return taps, (self.pt, bottom, self.pl, right)


def out_hw(H, W, kh, kw, stride, pads, dilation) -> tuple:
    """The output height and width of a 2-D window of kh x kw taps."""
    pt, pb, pl, pr = pads
    eh, ew = dilation[0] * (kh - 1) + 1, dilation[1] * (kw - 1) + 1
    return (H + pt + pb - eh) // stride[0] + 1, (W + pl + pr - ew) // stride[1] + 1


def _plain(kh, kw, stride, pads) -> bool:
    """A 1x1 kernel, stride 1, no padding: the columns are the input itself."""
    return kh == kw == 1 and tuple(stride) == (1, 1) and not any(pads)


class ConvKernels:
    """conv kernels (a mixin of ReferenceKernels)."""

    # ---- conv2d's whole-batch im2col paths -------------------------------------------------
    def conv2d_im2col(self, x, w, b, stride, pads, dilation, groups: int, out=None):
        """conv2d(x [N, C, H, W], w [O, C/groups, kh, kw]) + b through one im2col and one
        product per group (or per image, channels-last)."""
        self.ran("conv2d_im2col", self.path)
        xp = self.xp
        N = x.shape[0]
        O, Cg, kh, kw = w.shape
        G = groups
        oh, ow = out_hw(x.shape[2], x.shape[3], kh, kw, stride, pads, dilation)
        if self._channels_last(x, kh, kw, stride, pads, dilation, groups):
            if _plain(kh, kw, stride, pads):
                y = self.bmm(w.reshape(O, Cg), x.reshape(N, Cg, oh * ow))  # no copy of x
            else:
                w2 = xp.ascontiguousarray(w.transpose(0, 2, 3, 1)).reshape(O, kh * kw * Cg)
                # one small product per image, written straight into [N, O, oh*ow]
                cols = self._cols_nhwc(x, kh, kw, stride, pads, dilation)
                y = self.bmm(w2, cols.transpose(0, 2, 1))
            y = y.reshape(N, O, oh, ow)
        else:
            cols = self._cols(x, kh, kw, stride, pads, dilation, groups)  # [G, CKg, N*L]
            y = self.bmm(w.reshape(G, O // G, Cg * kh * kw), cols)   # [G, O/G, N*L]
            y = xp.ascontiguousarray(y.reshape(O, N, oh, ow).transpose(1, 0, 2, 3))
        if b is not None:
            y += b.reshape(O, 1, 1)
        return into(y, out)

    def conv2d_input_grad_col2im(self, g, w, x_shape, stride, pads, dilation, groups: int,
                                 out=None):
        """dx of conv2d (the transposed convolution of g with w) as one product per group
        and the strided scatter-adds of col2im."""
        self.ran("conv2d_input_grad_col2im", self.path)
        xp = self.xp
        O, Cg, kh, kw = w.shape
        G = groups
        g_t = xp.ascontiguousarray(g.transpose(1, 0, 2, 3)).reshape(G, O // G, -1)
        dcols = self.bmm(w.reshape(G, O // G, Cg * kh * kw).transpose(0, 2, 1), g_t)
        return into(self._col2im(dcols, x_shape, kh, kw, stride, pads, dilation), out)

    def conv2d_weight_grad_im2col(self, x, g, w_shape, stride, pads, dilation, groups: int,
                                  out=None):
        """dw of conv2d: the sum over the batch of g @ im2col(x)^T, one product per group."""
        self.ran("conv2d_weight_grad_im2col", self.path)
        xp = self.xp
        O, Cg, kh, kw = w_shape
        G = groups
        if self._channels_last(x, kh, kw, stride, pads, dilation, groups):
            K = kh * kw * Cg
            cols = self._cols_nhwc(x, kh, kw, stride, pads, dilation).reshape(-1, K)
            g_t = xp.ascontiguousarray(g.transpose(1, 0, 2, 3)).reshape(O, -1)
            dw = self.bmm(g_t, cols).reshape(O, kh, kw, Cg)
            return into(xp.ascontiguousarray(dw.transpose(0, 3, 1, 2)), out)
        cols = self._cols(x, kh, kw, stride, pads, dilation, groups)   # [G, CKg, N*L]
        g_t = xp.ascontiguousarray(g.transpose(1, 0, 2, 3)).reshape(G, O // G, -1)
        dw = self.bmm(g_t, cols.transpose(0, 2, 1))                # [G, O/G, CKg]
        return into(dw.reshape(w_shape), out)

    def _channels_last(self, x, kh, kw, stride, pads, dilation, groups) -> bool:
        """Whether to im2col through [N, H, W, C] (groups 1, more than one output pixel): the
        window copy then moves k*C contiguous values at a time, not ow, about twice as fast
        at small images (an 8x8 input has rows of 8)."""
        if groups != 1 or x.dtype.itemsize < 4:
            return False
        oh, ow = out_hw(x.shape[2], x.shape[3], kh, kw, stride, pads, dilation)
        return oh * ow > 1

    def _cols(self, x, kh, kw, stride, pads, dilation, groups):
        """im2col in [G, C/G * kh * kw, N * oh * ow] layout (one copy of the windows)."""
        xp = self.xp
        N, C, H, W = x.shape
        G = groups
        oh, ow = out_hw(H, W, kh, kw, stride, pads, dilation)
        if _plain(kh, kw, stride, pads):
            return xp.ascontiguousarray(x.transpose(1, 0, 2, 3)).reshape(G, C // G, N * H * W)
        xpad = self.pad2d(x, pads)
        dh, dw = dilation
        win = xp.lib.stride_tricks.sliding_window_view(
            xpad, ((kh - 1) * dh + 1, (kw - 1) * dw + 1), axis=(2, 3))
        win = win[:, :, : (oh - 1) * stride[0] + 1: stride[0],
                  : (ow - 1) * stride[1] + 1: stride[1], ::dh, ::dw]
        # [N, C, oh, ow, kh, kw] -> [C, kh, kw, N, oh, ow]
        return win.transpose(1, 4, 5, 0, 2, 3).reshape(G, C // G * kh * kw, N * oh * ow)

    def _cols_nhwc(self, x, kh, kw, stride, pads, dilation):
        """im2col in [N, oh * ow, kh * kw * C] layout, read from a channels-last padded copy."""
        xp = self.xp
        N, C, H, W = x.shape
        oh, ow = out_hw(H, W, kh, kw, stride, pads, dilation)
        pt, pb, pl, pr = pads
        xpad = xp.zeros((N, H + pt + pb, W + pl + pr, C), x.dtype)
        xpad[:, pt:pt + H, pl:pl + W, :] = x.transpose(0, 2, 3, 1)
        sN, sH, sW, sC = xpad.strides
        (s0, s1), (d0, d1) = stride, dilation
        win = self.strided_view(xpad, (N, oh, ow, kh, kw, C),
                                (sN, s0 * sH, s1 * sW, d0 * sH, d1 * sW, sC))
        return win.reshape(N, oh * ow, kh * kw * C)

    def strided_view(self, x, shape, strides):
        """A read view of the C-contiguous array x with `shape` and byte `strides`."""
        return self.xp.lib.stride_tricks.as_strided(x, shape, strides)

    def _col2im(self, dcols, x_shape, kh, kw, stride, pads, dilation):
        """The adjoint of _cols: add each column entry back to its input position."""
        xp = self.xp
        N, C, H, W = x_shape
        oh, ow = out_hw(H, W, kh, kw, stride, pads, dilation)
        d6 = dcols.reshape(C, kh, kw, N, oh, ow)
        pt, pb, pl, pr = pads
        if _plain(kh, kw, stride, pads):
            return xp.ascontiguousarray(d6.reshape(C, N, H, W).transpose(1, 0, 2, 3))
        dxp = xp.zeros((N, C, H + pt + pb, W + pl + pr), dcols.dtype)
        for k, (rs, cs) in window_offsets(kh, kw, dilation, stride, oh, ow):
            dxp[:, :, rs, cs] += d6[:, k // kw, k % kw].transpose(1, 0, 2, 3)
        if not any(pads):
            return dxp
        return dxp[:, :, pt:pt + H, pl:pl + W]

    def pad2d(self, x, pads, fill=0.0, extra=(0, 0), out=None):
        """x [N, C, H, W] padded by (top, bottom, left, right) (+ extra bottom/right rows)
        with `fill` (into `out` when given); x itself when there is nothing to pad."""
        pt, pb, pl, pr = pads
        pb, pr = pb + extra[0], pr + extra[1]
        if not (pt or pb or pl or pr):
            return into(x, out)
        N, C, H, W = x.shape
        shape = (N, C, H + pt + pb, W + pl + pr)
        xp = self.xp
        if out is None:
            out = xp.zeros(shape, x.dtype) if fill == 0 else xp.full(shape, fill, x.dtype)
        else:
            out.fill(fill)
        out[:, :, pt:pt + H, pl:pl + W] = x
        return out

    # ---- the blocked path's parts: columns of a block of output rows, a gemm into place --
    def conv_geometry(self, C, H, W, pt, pl, ow, kh, kw, stride, dilation) -> ConvGeometry:
        """The window geometry im2col and col2im take."""
        return ConvGeometry(C, H, W, pt, pl, ow, kh, kw, stride, dilation)

    def im2col(self, x, cols, geo, oy0: int, oy1: int):
        """cols [C*kh*kw, nimg*(oy1-oy0)*ow] <- the windows of output rows [oy0, oy1) of the
        images x [nimg, C, H, W]; zeros where a window reads padding."""
        self.ran("im2col", self.path)
        xp = self.xp
        nimg = x.shape[0]
        geo.check(x, cols, oy0, oy1)
        taps, (pt, pb, pl, pr) = geo._taps(oy0, oy1)
        xpad = x[:, :, max(0, -pt):geo.H + min(0, pb), max(0, -pl):geo.W + min(0, pr)]
        xpad = xp.pad(xpad, ((0, 0), (0, 0), (max(pt, 0), max(pb, 0)),
                             (max(pl, 0), max(pr, 0))))
        c6 = cols.reshape(geo.C, geo.kh * geo.kw, nimg, oy1 - oy0, geo.ow)
        for k, (rs, cs) in enumerate(taps):
            c6[:, k] = xpad[:, :, rs, cs].transpose(1, 0, 2, 3)
        return cols

    def col2im(self, cols, dx, geo, oy0: int, oy1: int):
        """The adjoint of im2col: dx [nimg, C, H, W] += each column entry at its input
        position (entries that read padding are dropped)."""
        self.ran("col2im", self.path)
        xp = self.xp
        nimg = dx.shape[0]
        geo.check(dx, cols, oy0, oy1)
        taps, (pt, pb, pl, pr) = geo._taps(oy0, oy1)
        H, W = geo.H, geo.W
        dxp = xp.zeros((nimg, geo.C, max(pt, 0) + H + max(pb, 0),
                        max(pl, 0) + W + max(pr, 0)), dx.dtype)
        c6 = cols.reshape(geo.C, geo.kh * geo.kw, nimg, oy1 - oy0, geo.ow)
        for k, (rs, cs) in enumerate(taps):
            dxp[:, :, rs, cs] += c6[:, k].transpose(1, 0, 2, 3)
        dx += dxp[:, :, max(pt, 0):max(pt, 0) + H, max(pl, 0):max(pl, 0) + W]
        return dx

    def gemm_into(self, a, b, out, beta: float):
        """out <- a @ b + beta * out (beta 0 or 1), for 2-D operands that may be transposed
        or strided views."""
        self.ran("gemm_into", self.path)
        if beta == 0:
            self.xp.matmul(a, b, out=out)
        else:
            out += a @ b
        return out

    # ---- Winograd F(2x2, 3x3): compiled tile transforms only -----------------------------
    def winograd_available(self) -> bool:
        """Whether this table has the Winograd tile transforms (conv2d_winograd.py)."""
        return False

    def winograd_input(self, x, V, pt: int, pl: int, ty0: int, ty1: int, tw: int):
        raise NotImplementedError("winograd_input: no portable Winograd transforms")

    def winograd_output(self, M, out, ty0: int, ty1: int, tw: int):
        raise NotImplementedError("winograd_output: no portable Winograd transforms")

    def winograd_output_grad(self, g, dM, ty0: int, ty1: int, tw: int):
        raise NotImplementedError("winograd_output_grad: no portable Winograd transforms")


def window_offsets(kh, kw, dil, stride, oh, ow):
    """For each kernel offset (i, j): the strided slices of the padded input it reads."""
    for i in range(kh):
        for j in range(kw):
            r0, c0 = i * dil[0], j * dil[1]
            yield i * kw + j, (slice(r0, r0 + stride[0] * (oh - 1) + 1, stride[0]),
                               slice(c0, c0 + stride[1] * (ow - 1) + 1, stride[1]))
