"""Per-op fixture cases of the conv family (see OP_CASE_FAMILIES in tools/gen_models.py).

Conv, ConvTranspose, MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool,
BatchNormalization and InstanceNormalization, with float64 numpy references written from the ONNX definitions.
Each case seeds its own generator, so adding cases here never changes another family's.
"""
import itertools

import numpy as np

from gen_models import EXACT, GEMM_TOL, NORM_TOL, REDUCE_TOL, float_data  # noqa: F401

# Conv accumulates up to a few hundred products in another order than numpy.
CONV_TOL = GEMM_TOL
POOL_AVG_TOL = REDUCE_TOL
# Nearest is exact; bilinear mixes four pixels with float weights.
RESIZE_TOL = (1e-5, 1e-5)


def _as_2d(x, spatial):
    """An (N, C, W) array as (N, C, 1, W); 2-D arrays unchanged."""
    return x[:, :, None, :] if spatial == 1 else x


def _pads_2d(pads, spatial):
    """ONNX pads [b..., e...] as (top, left, bottom, right)."""
    if spatial == 1:
        return (0, pads[0], 0, pads[1])
    return tuple(pads)


def _auto_pads(in_sizes, kernel, strides, dilations, auto_pad):
    """The begin/end pads and output sizes SAME_UPPER / SAME_LOWER give (forward ops)."""
    begin, end, out = [], [], []
    for i, n in enumerate(in_sizes):
        o = -(-n // strides[i])
        total = max(0, (o - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - n)
        small, large = total // 2, total - total // 2
        begin.append(small if auto_pad == "SAME_UPPER" else large)
        end.append(large if auto_pad == "SAME_UPPER" else small)
        out.append(o)
    return begin + end


def conv_ref(x, w, b, strides=None, pads=None, dilations=None, group=1, auto_pad="NOTSET"):
    spatial = x.ndim - 2
    strides = strides or [1] * spatial
    dilations = dilations or [1] * spatial
    kernel = list(w.shape[2:])
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads = _auto_pads(list(x.shape[2:]), kernel, strides, dilations, auto_pad)
    elif auto_pad == "VALID" or not pads:
        pads = [0] * (2 * spatial)
    x2 = _as_2d(x.astype(np.float64), spatial)
    w2 = _as_2d(w.astype(np.float64), spatial)
    s = (1, strides[0]) if spatial == 1 else tuple(strides)
    d = (1, dilations[0]) if spatial == 1 else tuple(dilations)
    pt, pl, pb, pr = _pads_2d(pads, spatial)
    xp = np.pad(x2, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    n, c, hp, wp = xp.shape
    m, cg, kh, kw = w2.shape
    oh = (hp - ((kh - 1) * d[0] + 1)) // s[0] + 1
    ow = (wp - ((kw - 1) * d[1] + 1)) // s[1] + 1
    mg = m // group
    y = np.zeros((n, m, oh, ow))
    for ki in range(kh):
        for kj in range(kw):
            h0, w0 = ki * d[0], kj * d[1]
            xs = xp[:, :, h0:h0 + s[0] * (oh - 1) + 1:s[0], w0:w0 + s[1] * (ow - 1) + 1:s[1]]
            for g in range(group):
                y[:, g * mg:(g + 1) * mg] += np.einsum(
                    "nchw,mc->nmhw", xs[:, g * cg:(g + 1) * cg], w2[g * mg:(g + 1) * mg, :, ki, kj])
    if b is not None:
        y += b.astype(np.float64)[None, :, None, None]
    if spatial == 1:
        y = y[:, :, 0, :]
    return y.astype(np.float32)


def conv_transpose_ref(x, w, b, strides=None, pads=None, dilations=None, group=1,
                       output_padding=None, output_shape=None, auto_pad="NOTSET"):
    spatial = x.ndim - 2
    strides = strides or [1] * spatial
    dilations = dilations or [1] * spatial
    output_padding = output_padding or [0] * spatial
    in_sizes = list(x.shape[2:])
    kernel = list(w.shape[2:])
    full = [strides[i] * (in_sizes[i] - 1) + output_padding[i] + (kernel[i] - 1) * dilations[i] + 1
            for i in range(spatial)]
    target = output_shape
    if target is None and auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        target = [in_sizes[i] * strides[i] for i in range(spatial)]
    if target is not None:
        begin, end = [], []
        for i in range(spatial):
            total = full[i] - target[i]
            bgn = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
            begin.append(bgn)
            end.append(total - bgn)
        pads = begin + end
    elif auto_pad == "VALID" or not pads:
        pads = [0] * (2 * spatial)
    x2 = _as_2d(x.astype(np.float64), spatial)
    w2 = _as_2d(w.astype(np.float64), spatial)
    s = (1, strides[0]) if spatial == 1 else tuple(strides)
    d = (1, dilations[0]) if spatial == 1 else tuple(dilations)
    f = (1, full[0]) if spatial == 1 else tuple(full)
    pt, pl, pb, pr = _pads_2d(pads, spatial)
    n, c, ih, iw = x2.shape
    _, mg, kh, kw = w2.shape
    cg = c // group
    yf = np.zeros((n, mg * group, f[0], f[1]))
    for ki in range(kh):
        for kj in range(kw):
            h0, w0 = ki * d[0], kj * d[1]
            for g in range(group):
                xg, wg = x2[:, g * cg:(g + 1) * cg], w2[g * cg:(g + 1) * cg, :, ki, kj]
                yf[:, g * mg:(g + 1) * mg, h0:h0 + s[0] * (ih - 1) + 1:s[0],
                   w0:w0 + s[1] * (iw - 1) + 1:s[1]] += np.einsum("nchw,cm->nmhw", xg, wg)
    y = yf[:, :, pt:f[0] - pb, pl:f[1] - pr]
    if b is not None:
        y = y + b.astype(np.float64)[None, :, None, None]
    if spatial == 1:
        y = y[:, :, 0, :]
    return y.astype(np.float32)


def _pool_dim(n, k, s, d, pb, pe, ceil_mode, auto_pad):
    """Output size and begin/end pads of one pooled dim, as ONNX (and PyTorch) define it."""
    span = (k - 1) * d + 1
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        o = -(-n // s)
        total = max(0, (o - 1) * s + span - n)
        small, large = total // 2, total - total // 2
        return o, (small, large) if auto_pad == "SAME_UPPER" else (large, small)
    if auto_pad == "VALID":
        pb = pe = 0
    room = n + pb + pe - span
    if ceil_mode and auto_pad == "NOTSET":
        o = -(-room // s) + 1
        if (o - 1) * s >= n + pb:
            o -= 1
    else:
        o = room // s + 1
    return o, (pb, pe)


def pool_ref(x, kind, kernel, strides=None, pads=None, dilations=None, ceil_mode=0,
             auto_pad="NOTSET", count_include_pad=0):
    """kind 'max' gives (Y, Indices); 'avg' gives Y."""
    spatial = x.ndim - 2
    strides = strides or [1] * spatial
    dilations = dilations or [1] * spatial
    pads = pads or [0] * (2 * spatial)
    dims = [_pool_dim(x.shape[2 + i], kernel[i], strides[i], dilations[i], pads[i],
                      pads[i + spatial], ceil_mode, auto_pad) for i in range(spatial)]
    x2 = _as_2d(x.astype(np.float64), spatial)
    if spatial == 1:
        dims = [(1, (0, 0))] + dims
        kernel, strides, dilations = [1] + kernel, [1] + strides, [1] + dilations
    n, c, h, w = x2.shape
    (oh, (pt, pb)), (ow, (pl, pr)) = dims
    y = np.zeros((n, c, oh, ow))
    idx = np.zeros((n, c, oh, ow), np.int64)
    for r in range(oh):
        for q in range(ow):
            rows = [r * strides[0] - pt + i * dilations[0] for i in range(kernel[0])]
            cols = [q * strides[1] - pl + j * dilations[1] for j in range(kernel[1])]
            vr = [v for v in rows if 0 <= v < h]
            vc = [v for v in cols if 0 <= v < w]
            win = x2[:, :, vr][:, :, :, vc].reshape(n, c, -1)
            if kind == "max":
                am = win.argmax(axis=2)
                y[:, :, r, q] = win.max(axis=2)
                flat = np.array([vr[a // len(vc)] * w + vc[a % len(vc)] for a in am.ravel()])
                idx[:, :, r, q] = flat.reshape(n, c) + (np.arange(n * c) * h * w).reshape(n, c)
            else:
                if count_include_pad:
                    cnt = (len([v for v in rows if -pt <= v < h + pb]) *
                           len([v for v in cols if -pl <= v < w + pr]))
                else:
                    cnt = win.shape[2]
                y[:, :, r, q] = win.sum(axis=2) / cnt
    if spatial == 1:
        y, idx = y[:, :, 0, :], idx[:, :, 0, :]
    return (y.astype(np.float32), idx) if kind == "max" else y.astype(np.float32)


def batchnorm_ref(x, scale, b, mean, var, eps):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    xd = x.astype(np.float64)
    y = (xd - mean.reshape(shape)) / np.sqrt(var.astype(np.float64).reshape(shape) + eps)
    return (y * scale.reshape(shape) + b.reshape(shape)).astype(np.float32)


def instancenorm_ref(x, scale, b, eps):
    axes = tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    xd = x.astype(np.float64)
    mean = xd.mean(axis=axes, keepdims=True)
    var = ((xd - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (xd - mean) / np.sqrt(var + eps)
    return (y * scale.reshape(shape) + b.reshape(shape)).astype(np.float32)


def _source_coord(o, n_in, n_out, scale, coord):
    """The input coordinate output index o maps to, in float32 as the kernels compute."""
    f = np.float32
    x = f(o)
    if coord == "half_pixel":
        return (x + f(0.5)) / f(scale) - f(0.5)
    if coord == "pytorch_half_pixel":
        return (x + f(0.5)) / f(scale) - f(0.5) if n_out > 1 else f(0)
    if coord == "align_corners":
        return f(0) if n_out == 1 else x * f(n_in - 1) / f(n_out - 1)
    if coord == "asymmetric":
        return x / f(scale)
    return (x + f(0.5)) / f(scale)  # tf_half_pixel_for_nn


def _resize_axis(n_in, n_out, scale, mode, coord, nearest):
    """Per output index: (i0, i1, w1) along one axis, in float32 as the kernels compute."""
    f = np.float32
    taps = []
    for o in range(n_out):
        s = _source_coord(o, n_in, n_out, scale, coord)
        if mode == "nearest":
            fl = np.floor(s)
            half = s == fl + f(0.5)
            if nearest == "round_prefer_floor":
                i = fl if half else np.round(s)
            elif nearest == "round_prefer_ceil":
                i = fl + 1 if half else np.round(s)
            elif nearest == "floor":
                i = fl
            else:
                i = np.ceil(s)
            i = min(max(int(i), 0), n_in - 1)
            taps.append((i, i, 0.0))
        else:
            s = min(max(float(s), 0.0), float(n_in - 1))
            i0 = int(np.floor(s))
            taps.append((i0, min(i0 + 1, n_in - 1), s - i0))
    return taps


def _resize_out(xs, scales, sizes):
    """Resize's output sizes and per-dim scales, from whichever of scales and sizes is given."""
    if sizes is not None:
        return list(sizes), [np.float32(o) / np.float32(i) for o, i in zip(sizes, xs)]
    return [int(np.floor(i * float(np.float32(s)))) for i, s in zip(xs, scales)], scales


def resize_ref(x, mode, coord, nearest, scales, sizes):
    """Resize over the last two dims (np.round is half-to-even, but exact halves never reach
    it: they are decided by the nearest mode first)."""
    xs = list(x.shape)
    out, scales = _resize_out(xs, scales, sizes)
    x3 = x.reshape((-1, 1 if x.ndim == 1 else xs[-2], xs[-1])).astype(np.float64)
    hin, win = x3.shape[1], x3.shape[2]
    hout = 1 if x.ndim == 1 else out[-2]
    hs = scales[-2] if x.ndim > 1 else 1.0
    rows = _resize_axis(hin, hout, hs, mode, coord, nearest)
    cols = _resize_axis(win, out[-1], scales[-1], mode, coord, nearest)
    y = np.zeros((x3.shape[0], hout, out[-1]))
    for r, (r0, r1, wy) in enumerate(rows):
        for c, (c0, c1, wx) in enumerate(cols):
            top = x3[:, r0, c0] * (1 - wx) + x3[:, r0, c1] * wx
            bottom = x3[:, r1, c0] * (1 - wx) + x3[:, r1, c1] * wx
            y[:, r, c] = top * (1 - wy) + bottom * wy
    return y.reshape(out).astype(np.float32)


def _axis_matrix(n_in, n_out, scale, mode, coord, nearest, cubic_a=-0.75, exclude_outside=0):
    """The (n_out, n_in) matrix of one axis' interpolation weights: nearest and linear
    from _resize_axis, cubic from Keys' kernel over an edge-padded input (ONNX's
    reference)."""
    m = np.zeros((n_out, n_in))
    if mode != "cubic":
        for o, (i0, i1, w1) in enumerate(_resize_axis(n_in, n_out, scale, mode, coord, nearest)):
            m[o, i0] += 1 - w1
            m[o, i1] += w1
        return m
    a = cubic_a
    for o in range(n_out):
        s = _source_coord(o, n_in, n_out, scale, coord)  # no linear clamp for cubic
        fl = int(np.floor(s))
        t = float(s) - fl
        d = [t + 1, t, 1 - t, 2 - t]
        w = [((a * v - 5 * a) * v + 8 * a) * v - 4 * a if k in (0, 3)
             else ((a + 2) * v - (a + 3)) * v * v + 1 for k, v in enumerate(d)]
        taps = [fl - 1 + k for k in range(4)]
        if exclude_outside:
            w = [wk if 0 <= tk < n_in else 0.0 for wk, tk in zip(w, taps)]
            total = sum(w)
            w = [wk / total for wk in w]
        for wk, tk in zip(w, taps):
            m[o, min(max(tk, 0), n_in - 1)] += wk
    return m


def resize_nd_ref(x, mode, coord, nearest, scales, sizes, cubic_a=-0.75, exclude_outside=0):
    """Resize of any rank as one interpolation matrix per resized axis (n-linear and
    n-cubic are separable)."""
    xs = list(x.shape)
    out, scales = _resize_out(xs, scales, sizes)
    y = x.astype(np.float64)
    for axis in range(x.ndim):
        if out[axis] == xs[axis] and float(scales[axis]) == 1.0:
            continue
        m = _axis_matrix(xs[axis], out[axis], scales[axis], mode, coord, nearest, cubic_a,
                         exclude_outside)
        y = np.moveaxis(np.tensordot(m, np.moveaxis(y, axis, 0), axes=(1, 0)), 0, axis)
    return y.astype(np.float32)


def _grid_reflect(x, lo2, hi2):
    if lo2 == hi2:
        return 0.0
    lo, span = lo2 / 2, (hi2 - lo2) / 2
    x = abs(x - lo)
    extra, flips = np.fmod(x, span), int(np.floor(x / span))
    return extra + lo if flips % 2 == 0 else span - extra + lo


def _grid_pad(x, size, padding, align):
    if padding == "zeros":
        return x
    if padding == "reflection":
        x = _grid_reflect(x, 0, 2 * (size - 1)) if align else _grid_reflect(x, -1, 2 * size - 1)
    return min(max(x, 0.0), size - 1.0)


def grid_sample_ref(x, grid, mode="bilinear", padding="zeros", align=0):
    """GridSample-16 as PyTorch's grid_sampler_2d defines it, in float64, point by point."""
    n, c, h, w = x.shape
    _, ho, wo, _ = grid.shape
    xd, y = x.astype(np.float64), np.zeros((n, c, ho, wo))

    def unnorm(g, size):
        return (g + 1) / 2 * (size - 1) if align else ((g + 1) * size - 1) / 2

    def pixel(img, yi, xi, pad_taps):
        if pad_taps:
            yi = int(_grid_pad(float(yi), h, padding, align))
            xi = int(_grid_pad(float(xi), w, padding, align))
        if 0 <= yi < h and 0 <= xi < w:
            return xd[img, :, yi, xi]
        return np.zeros(c)

    def cubic(t):
        a = -0.75
        d = [t + 1, t, 1 - t, 2 - t]
        return [((a + 2) * v - (a + 3)) * v * v + 1 if k in (1, 2)
                else ((a * v - 5 * a) * v + 8 * a) * v - 4 * a for k, v in enumerate(d)]

    for i in range(n):
        for r in range(ho):
            for q in range(wo):
                gx, gy = float(grid[i, r, q, 0]), float(grid[i, r, q, 1])
                px, py = unnorm(gx, w), unnorm(gy, h)
                if mode == "bicubic":
                    fx, fy = np.floor(px), np.floor(py)
                    wx, wy = cubic(px - fx), cubic(py - fy)
                    acc = np.zeros(c)
                    for a_ in range(4):
                        for b_ in range(4):
                            acc += wy[a_] * wx[b_] * pixel(i, int(fy) - 1 + a_, int(fx) - 1 + b_,
                                                           True)
                    y[i, :, r, q] = acc
                    continue
                if mode == "nearest":  # in float32, as the kernels pick the pixel
                    f = np.float32
                    fx32 = f(_grid_pad(f(unnorm(f(gx), f(w))), w, padding, align))
                    fy32 = f(_grid_pad(f(unnorm(f(gy), f(h))), h, padding, align))
                    y[i, :, r, q] = pixel(i, int(np.rint(fy32)), int(np.rint(fx32)), False)
                    continue
                px, py = _grid_pad(px, w, padding, align), _grid_pad(py, h, padding, align)
                fx, fy = int(np.floor(px)), int(np.floor(py))
                ax, ay = px - fx, py - fy
                y[i, :, r, q] = ((1 - ay) * (1 - ax) * pixel(i, fy, fx, False) +
                                 (1 - ay) * ax * pixel(i, fy, fx + 1, False) +
                                 ay * (1 - ax) * pixel(i, fy + 1, fx, False) +
                                 ay * ax * pixel(i, fy + 1, fx + 1, False))
    return y.astype(np.float32)


def _ints(v):
    return ("ints", list(v))


def _resize_node(x, mode, coord, nearest, scales, sizes):
    """A Resize case's inputs (roi, scales and sizes as constants) and attributes."""
    inputs = [("input", "X", x), ("const", "roi", np.zeros((0,), np.float32)),
              ("const", "scales", np.array(scales or [], np.float32))]
    if sizes is not None:
        inputs.append(("const", "sizes", np.array(sizes, np.int64)))
    attrs = {"mode": ("string", mode), "coordinate_transformation_mode": ("string", coord)}
    if nearest is not None:
        attrs["nearest_mode"] = ("string", nearest)
    return inputs, attrs


def _tap_slices(starts, strides, counts):
    """The strided slice of every spatial dim that one kernel tap reads or writes."""
    return tuple(slice(b, b + s * (o - 1) + 1, s) for b, s, o in zip(starts, strides, counts))


def conv_nd_ref(x, w, b, strides, pads, dilations, group):
    """Conv of any spatial rank (explicit pads only), one kernel tap at a time."""
    r = x.ndim - 2
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(pads[i], pads[i + r]) for i in range(r)])
    k = w.shape[2:]
    out = [(xp.shape[2 + i] - ((k[i] - 1) * dilations[i] + 1)) // strides[i] + 1 for i in range(r)]
    m, cg = w.shape[:2]
    mg = m // group
    y = np.zeros((x.shape[0], m, *out))
    for tap in itertools.product(*[range(v) for v in k]):
        xs = xp[(slice(None), slice(None)) +
                _tap_slices([t * d for t, d in zip(tap, dilations)], strides, out)]
        for g in range(group):
            wg = w[(slice(g * mg, (g + 1) * mg), slice(None)) + tap].astype(np.float64)
            y[:, g * mg:(g + 1) * mg] += np.einsum("nc...,mc->nm...", xs[:, g * cg:(g + 1) * cg], wg)
    if b is not None:
        y += b.astype(np.float64).reshape((1, -1) + (1,) * r)
    return y.astype(np.float32)


def conv_transpose_nd_ref(x, w, b, strides, pads, output_padding, group):
    """ConvTranspose of any spatial rank (explicit pads, dilation 1): each input pixel
    scatters W over the full output, which the pads then crop."""
    r = x.ndim - 2
    k = w.shape[2:]
    ins = x.shape[2:]
    full = [strides[i] * (ins[i] - 1) + output_padding[i] + k[i] for i in range(r)]
    cg, mg = x.shape[1] // group, w.shape[1]
    yf = np.zeros((x.shape[0], mg * group, *full))
    for tap in itertools.product(*[range(v) for v in k]):
        sl = (slice(None), slice(None)) + _tap_slices(tap, strides, ins)
        for g in range(group):
            xg = x[:, g * cg:(g + 1) * cg].astype(np.float64)
            wg = w[(slice(g * cg, (g + 1) * cg), slice(None)) + tap].astype(np.float64)
            yf[:, g * mg:(g + 1) * mg][sl] += np.einsum("nc...,cm->nm...", xg, wg)
    y = yf[(slice(None), slice(None)) +
           tuple(slice(pads[i], full[i] - pads[i + r]) for i in range(r))]
    if b is not None:
        y = y + b.astype(np.float64).reshape((1, -1) + (1,) * r)
    return y.astype(np.float32)


def pool_nd_ref(x, kind, kernel, strides, pads, ceil_mode=0, count_include_pad=0):
    """MaxPool (Y, Indices) or AveragePool (Y) of any spatial rank, explicit pads, output
    by output."""
    r = x.ndim - 2
    dims = [_pool_dim(x.shape[2 + i], kernel[i], strides[i], 1, pads[i], pads[i + r], ceil_mode,
                      "NOTSET") for i in range(r)]
    out = [o for o, _ in dims]
    n, c = x.shape[:2]
    xd = x.astype(np.float64).reshape(n * c, -1)
    y = np.zeros((n * c, *out))
    idx = np.zeros((n * c, *out), np.int64)
    for pos in itertools.product(*[range(o) for o in out]):
        taps = [[p * strides[i] - dims[i][1][0] + j for j in range(kernel[i])]
                for i, p in enumerate(pos)]
        valid = [[v for v in t if 0 <= v < x.shape[2 + i]] for i, t in enumerate(taps)]
        flat = np.array([np.ravel_multi_index(t, x.shape[2:])
                         for t in itertools.product(*valid)], np.int64)
        win = xd[:, flat]
        if kind == "max":
            y[(slice(None),) + pos] = win.max(axis=1)
            idx[(slice(None),) + pos] = flat[win.argmax(axis=1)] + np.arange(n * c) * xd.shape[1]
        else:
            if count_include_pad:
                cnt = np.prod([len([v for v in t if -dims[i][1][0] <= v < x.shape[2 + i] +
                                    dims[i][1][1]]) for i, t in enumerate(taps)])
            else:
                cnt = len(flat)
            y[(slice(None),) + pos] = win.sum(axis=1) / cnt
    y = y.reshape(n, c, *out).astype(np.float32)
    return (y, idx.reshape(n, c, *out)) if kind == "max" else y


def cases(add, rng):
    """Adds this family's OpCases: add(name, op, opset, inputs, outputs, attrs=, tol=)."""
    del rng  # every case seeds its own generator (see the module docstring)
    seed = [7000]

    def gen():
        seed[0] += 1
        return np.random.default_rng(seed[0])

    # Conv --------------------------------------------------------------------------------
    conv_cases = [
        # name, opset, x shape, w shape, bias, attrs (ONNX names)
        ("conv2d_pads_bias", 13, (2, 3, 7, 6), (4, 3, 3, 3), True, {"pads": [1, 1, 1, 1]}),
        ("conv2d_strides_asym_pads_dilations", 17, (1, 2, 9, 8), (3, 2, 3, 2), False,
         {"strides": [2, 1], "pads": [1, 0, 2, 1], "dilations": [2, 1]}),
        ("conv2d_group2", 13, (2, 4, 5, 5), (6, 2, 3, 3), True, {"group": 2, "pads": [1, 1, 1, 1]}),
        ("conv2d_depthwise_stride2", 13, (1, 3, 6, 7), (3, 1, 3, 3), True,
         {"group": 3, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
        ("conv2d_depthwise_multiplier_dilated", 13, (2, 2, 6, 5), (4, 1, 3, 3), False,
         {"group": 2, "dilations": [2, 2], "pads": [2, 1, 2, 1]}),
        ("conv2d_pointwise", 13, (2, 5, 4, 3), (3, 5, 1, 1), True, {}),
        ("conv2d_pointwise_strided", 13, (1, 4, 5, 5), (2, 4, 1, 1), False, {"strides": [2, 2]}),
        ("conv2d_same_upper", 13, (1, 2, 7, 7), (2, 2, 4, 4), True,
         {"strides": [2, 2], "auto_pad": "SAME_UPPER", "kernel_shape": [4, 4]}),
        ("conv2d_same_lower", 13, (1, 2, 6, 5), (3, 2, 4, 2), False,
         {"auto_pad": "SAME_LOWER"}),
        ("conv2d_valid", 13, (1, 3, 6, 6), (2, 3, 3, 3), True,
         {"auto_pad": "VALID", "strides": [2, 2]}),
        ("conv2d_empty_batch", 13, (0, 3, 5, 5), (2, 3, 3, 3), True, {}),
        ("conv1d_strides_pads_bias", 13, (2, 3, 10), (4, 3, 3), True,
         {"strides": [2], "pads": [1, 2]}),
        ("conv1d_depthwise_dilated", 13, (1, 4, 9), (4, 1, 5), True,
         {"group": 4, "dilations": [2], "pads": [4, 4]}),
    ]
    for name, opset, xs, ws, has_b, attrs in conv_cases:
        r = gen()
        x, w = float_data(r, xs), float_data(r, ws, -1.0, 1.0)
        b = float_data(r, (ws[0],)) if has_b else None
        y = conv_ref(x, w, b, strides=attrs.get("strides"), pads=attrs.get("pads"),
                     dilations=attrs.get("dilations"), group=attrs.get("group", 1),
                     auto_pad=attrs.get("auto_pad", "NOTSET"))
        onnx_attrs = {k: (("string", v) if isinstance(v, str) else ("int", v) if isinstance(v, int)
                          else _ints(v)) for k, v in attrs.items()}
        inputs = [("input", "X", x), ("const", "W", w)] + ([("const", "B", b)] if has_b else [])
        add(name, "Conv", opset, inputs, [("Y", y)], attrs=onnx_attrs, tol=CONV_TOL)
    # Weights fed at run time, not as initializers.
    r = gen()
    x, w, b = float_data(r, (1, 2, 4, 4)), float_data(r, (2, 2, 2, 2)), float_data(r, (2,))
    add("conv2d_runtime_weights", "Conv", 13, [("input", "X", x), ("input", "W", w),
                                               ("input", "B", b)],
        [("Y", conv_ref(x, w, b))], tol=CONV_TOL)

    # ConvTranspose -----------------------------------------------------------------------
    convt_cases = [
        ("convtranspose2d_stride2_pads_outpad", 13, (1, 3, 4, 5), (3, 2, 3, 3), True,
         {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]}),
        ("convtranspose2d_group_dilation", 13, (2, 4, 3, 3), (4, 3, 2, 3), False,
         {"group": 2, "dilations": [2, 1], "strides": [1, 2]}),
        ("convtranspose2d_output_shape", 13, (1, 2, 3, 3), (2, 2, 3, 3), True,
         {"strides": [2, 2], "output_shape": [6, 7]}),
        ("convtranspose2d_same_upper", 13, (1, 2, 3, 4), (2, 3, 3, 3), False,
         {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
        ("convtranspose2d_same_lower", 17, (1, 2, 3, 3), (2, 2, 4, 4), True,
         {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
        ("convtranspose1d", 13, (2, 3, 5), (3, 2, 4), True, {"strides": [3], "pads": [1, 2]}),
    ]
    for name, opset, xs, ws, has_b, attrs in convt_cases:
        r = gen()
        x, w = float_data(r, xs), float_data(r, ws, -1.0, 1.0)
        b = float_data(r, (ws[1] * attrs.get("group", 1),)) if has_b else None
        y = conv_transpose_ref(x, w, b, strides=attrs.get("strides"), pads=attrs.get("pads"),
                               dilations=attrs.get("dilations"), group=attrs.get("group", 1),
                               output_padding=attrs.get("output_padding"),
                               output_shape=attrs.get("output_shape"),
                               auto_pad=attrs.get("auto_pad", "NOTSET"))
        onnx_attrs = {k: (("string", v) if isinstance(v, str) else ("int", v) if isinstance(v, int)
                          else _ints(v)) for k, v in attrs.items()}
        inputs = [("input", "X", x), ("const", "W", w)] + ([("const", "B", b)] if has_b else [])
        add(name, "ConvTranspose", opset, inputs, [("Y", y)], attrs=onnx_attrs, tol=CONV_TOL)

    # MaxPool / AveragePool ---------------------------------------------------------------
    pool_cases = [
        # name, op, opset, x shape, attrs, with Indices
        ("maxpool2d_k3_s2_p1", "MaxPool", 13, (2, 3, 7, 8),
         {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, False),
        ("maxpool2d_ceil_mode", "MaxPool", 13, (1, 2, 8, 7),
         {"kernel_shape": [3, 2], "strides": [2, 2], "ceil_mode": 1}, False),
        ("maxpool2d_dilations_indices", "MaxPool", 13, (2, 2, 7, 7),
         {"kernel_shape": [2, 2], "dilations": [2, 2], "pads": [1, 0, 1, 1]}, True),
        ("maxpool2d_same_upper", "MaxPool", 17, (1, 3, 5, 6),
         {"kernel_shape": [2, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"}, False),
        ("maxpool1d", "MaxPool", 13, (2, 3, 9), {"kernel_shape": [3], "strides": [2],
                                                 "pads": [1, 1]}, True),
        ("averagepool2d_exclude_pad", "AveragePool", 13, (2, 3, 6, 7),
         {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, False),
        ("averagepool2d_count_include_pad", "AveragePool", 13, (1, 2, 6, 7),
         {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
          "count_include_pad": 1}, False),
        ("averagepool2d_ceil_include_pad", "AveragePool", 13, (1, 2, 7, 6),
         {"kernel_shape": [2, 3], "strides": [2, 2], "pads": [0, 1, 0, 1], "ceil_mode": 1,
          "count_include_pad": 1}, False),
        ("averagepool2d_ceil_exclude_pad", "AveragePool", 13, (1, 2, 8, 7),
         {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}, False),
        ("averagepool2d_same_lower", "AveragePool", 13, (1, 2, 5, 5),
         {"kernel_shape": [2, 2], "auto_pad": "SAME_LOWER"}, False),
        ("averagepool2d_valid", "AveragePool", 13, (1, 2, 6, 6),
         {"kernel_shape": [2, 2], "strides": [2, 2], "auto_pad": "VALID"}, False),
        ("averagepool1d", "AveragePool", 13, (2, 2, 10), {"kernel_shape": [4], "strides": [3],
                                                          "pads": [2, 2]}, False),
    ]
    for name, op, opset, xs, attrs, with_indices in pool_cases:
        r = gen()
        x = float_data(r, xs)
        kw = dict(strides=attrs.get("strides"), pads=attrs.get("pads"),
                  dilations=attrs.get("dilations"), ceil_mode=attrs.get("ceil_mode", 0),
                  auto_pad=attrs.get("auto_pad", "NOTSET"))
        onnx_attrs = {k: (("string", v) if isinstance(v, str) else ("int", v) if isinstance(v, int)
                          else _ints(v)) for k, v in attrs.items()}
        if op == "MaxPool":
            y, idx = pool_ref(x, "max", attrs["kernel_shape"], **kw)
            outputs = [("Y", y)] + ([("Indices", idx)] if with_indices else [])
            add(name, op, opset, [("input", "X", x)], outputs, attrs=onnx_attrs, tol=EXACT)
        else:
            y = pool_ref(x, "avg", attrs["kernel_shape"],
                         count_include_pad=attrs.get("count_include_pad", 0), **kw)
            add(name, op, opset, [("input", "X", x)], [("Y", y)], attrs=onnx_attrs,
                tol=POOL_AVG_TOL)

    # GlobalAveragePool / GlobalMaxPool ---------------------------------------------------
    for tag, xs in [("4d", (2, 3, 5, 7)), ("3d", (2, 4, 40))]:
        r = gen()
        x = float_data(r, xs)
        axes = tuple(range(2, x.ndim))
        add(f"globalaveragepool_{tag}", "GlobalAveragePool", 13, [("input", "X", x)],
            [("Y", x.mean(axis=axes, keepdims=True, dtype=np.float64).astype(np.float32))],
            tol=POOL_AVG_TOL)
        add(f"globalmaxpool_{tag}", "GlobalMaxPool", 13, [("input", "X", x)],
            [("Y", x.max(axis=axes, keepdims=True))], tol=EXACT)

    # BatchNormalization (inference) ------------------------------------------------------
    for name, opset, xs, eps in [("batchnorm_4d", 15, (2, 3, 4, 5), 1e-5),
                                 ("batchnorm_2d_eps", 14, (4, 6), 1e-3),
                                 ("batchnorm_3d_opset13", 13, (2, 5, 7), 1e-5)]:
        r = gen()
        c = xs[1]
        x = float_data(r, xs)
        scale, b = float_data(r, (c,)), float_data(r, (c,))
        mean, var = float_data(r, (c,)), r.uniform(0.1, 2.0, size=(c,)).astype(np.float32)
        attrs = {} if eps == 1e-5 else {"epsilon": ("float", eps)}
        add(name, "BatchNormalization", opset,
            [("input", "X", x), ("const", "scale", scale), ("const", "B", b),
             ("const", "input_mean", mean), ("const", "input_var", var)],
            [("Y", batchnorm_ref(x, scale, b, mean, var, eps))], attrs=attrs, tol=NORM_TOL)

    # Resize (roi, scales, sizes are constants read on the host) ---------------------------
    resize_cases = [
        # name, x shape, mode, coordinate mode, nearest mode, scales or None, sizes or None
        ("resize_nearest_asymmetric_floor", (1, 2, 4, 5), "nearest", "asymmetric", "floor",
         [1.0, 1.0, 2.0, 2.0], None),
        ("resize_nearest_half_pixel_sizes", (1, 2, 6, 5), "nearest", "half_pixel",
         "round_prefer_floor", None, [1, 2, 9, 3]),
        ("resize_nearest_align_corners_prefer_ceil", (2, 1, 4, 5), "nearest", "align_corners",
         "round_prefer_ceil", [1.0, 1.0, 1.5, 2.5], None),
        ("resize_nearest_tf_half_pixel_ceil", (1, 1, 5, 4), "nearest", "tf_half_pixel_for_nn",
         "ceil", None, [1, 1, 3, 7]),
        ("resize_linear_half_pixel_scales", (2, 3, 4, 5), "linear", "half_pixel", None,
         [1.0, 1.0, 2.0, 2.0], None),
        ("resize_linear_pytorch_half_pixel_sizes", (1, 2, 5, 6), "linear", "pytorch_half_pixel",
         None, None, [1, 2, 1, 4]),
        ("resize_linear_align_corners", (2, 1, 4, 5), "linear", "align_corners", None, None,
         [2, 1, 7, 9]),
        ("resize_linear_asymmetric_rank3", (2, 3, 6), "linear", "asymmetric", None,
         [1.0, 2.0, 0.5], None),
    ]
    for name, xs, mode, coord, nearest, scales, sizes in resize_cases:
        r = gen()
        x = float_data(r, xs)
        y = resize_ref(x, mode, coord, nearest or "round_prefer_floor", scales, sizes)
        inputs, attrs = _resize_node(x, mode, coord, nearest, scales, sizes)
        add(name, "Resize", 13, inputs, [("Y", y)], attrs=attrs, tol=RESIZE_TOL)

    # InstanceNormalization (PyTorch's GroupNorm and InstanceNorm*d) ----------------------
    # "offset": every plane around 500 with a spread of 0.05, which FP32 sums of the raw
    # values would blur; "wide": planes longer than a CUDA block, constant scale and bias.
    for name, xs, eps, offset in [("instancenorm_4d", (2, 3, 4, 5), 1e-5, 0.0),
                                  ("instancenorm_3d_eps", (2, 4, 40), 1e-3, 0.0),
                                  ("instancenorm_offset", (1, 2, 3, 300), 1e-5, 500.0),
                                  ("instancenorm_wide_5d", (1, 2, 3, 10, 33), 1e-5, 0.0)]:
        r = gen()
        c = xs[1]
        if offset:
            x = (offset + r.normal(0.0, 0.05, size=xs)).astype(np.float32)
        else:
            x = float_data(r, xs)
        scale, b = float_data(r, (c,)), float_data(r, (c,))
        attrs = {} if eps == 1e-5 else {"epsilon": ("float", eps)}
        kind = "input" if name == "instancenorm_4d" else "const"
        add(name, "InstanceNormalization", 17 if name == "instancenorm_3d_eps" else 13,
            [("input", "input", x), (kind, "scale", scale), (kind, "B", b)],
            [("output", instancenorm_ref(x, scale, b, eps))], attrs=attrs, tol=NORM_TOL)

    # 3-D convolution and pooling (PyTorch's Conv3d, ConvTranspose3d, MaxPool3d, AvgPool3d:
    # video models and volumetric UNets) ---------------------------------------------------
    conv3d_cases = [
        # name, x shape, w shape, bias, strides, pads, dilations, group
        ("conv3d_strides_pads_bias", (2, 3, 5, 6, 7), (4, 3, 3, 3, 3), True, [1, 2, 2],
         [1, 1, 1, 1, 1, 1], [1, 1, 1], 1),
        ("conv3d_group_dilated_asym_pads", (1, 4, 6, 5, 6), (6, 2, 2, 3, 2), False, [2, 1, 1],
         [0, 1, 1, 1, 0, 2], [2, 1, 2], 2),
        ("conv3d_depthwise", (1, 3, 4, 5, 5), (3, 1, 3, 3, 3), True, [1, 1, 1],
         [1, 1, 1, 1, 1, 1], [1, 1, 1], 3),
        ("conv3d_pointwise", (2, 4, 3, 3, 4), (5, 4, 1, 1, 1), True, [1, 1, 1],
         [0, 0, 0, 0, 0, 0], [1, 1, 1], 1),
        ("conv3d_temporal_kernel", (1, 2, 7, 4, 4), (3, 2, 3, 1, 1), True, [2, 1, 1],
         [1, 0, 0, 1, 0, 0], [1, 1, 1], 1),
        # A small output volume and a batch: the CPU's images-in-one-GEMM path.
        ("conv3d_batch_small_volume", (3, 4, 4, 4, 4), (5, 4, 3, 3, 3), True, [1, 1, 1],
         [0, 0, 0, 0, 0, 0], [1, 1, 1], 1),
    ]
    for name, xs, ws, has_b, strides, pads, dilations, group in conv3d_cases:
        r = gen()
        x, w = float_data(r, xs), float_data(r, ws, -1.0, 1.0)
        b = float_data(r, (ws[0],)) if has_b else None
        attrs = {"strides": _ints(strides), "pads": _ints(pads), "dilations": _ints(dilations),
                 "group": ("int", group)}
        inputs = [("input", "X", x), ("const", "W", w)] + ([("const", "B", b)] if has_b else [])
        add(name, "Conv", 13, inputs, [("Y", conv_nd_ref(x, w, b, strides, pads, dilations, group))],
            attrs=attrs, tol=CONV_TOL)
    for name, xs, ws, has_b, strides, pads, out_pad, group in [
            ("convtranspose3d_stride2_outpad", (1, 3, 3, 4, 3), (3, 2, 3, 3, 2), True, [2, 2, 2],
             [1, 1, 0, 1, 1, 0], [1, 1, 1], 1),
            ("convtranspose3d_group", (2, 4, 2, 3, 3), (4, 1, 2, 2, 2), False, [2, 2, 2],
             [0, 0, 0, 0, 0, 0], [0, 0, 0], 2)]:
        r = gen()
        x, w = float_data(r, xs), float_data(r, ws, -1.0, 1.0)
        b = float_data(r, (ws[1] * group,)) if has_b else None
        attrs = {"strides": _ints(strides), "pads": _ints(pads),
                 "output_padding": _ints(out_pad), "group": ("int", group)}
        inputs = [("input", "X", x), ("const", "W", w)] + ([("const", "B", b)] if has_b else [])
        add(name, "ConvTranspose", 13, inputs,
            [("Y", conv_transpose_nd_ref(x, w, b, strides, pads, out_pad, group))], attrs=attrs,
            tol=CONV_TOL)
    for name, op, xs, kernel, strides, pads, extra in [
            ("maxpool3d_k3_s2_p1", "MaxPool", (2, 3, 5, 6, 7), [3, 3, 3], [2, 2, 2],
             [1, 1, 1, 1, 1, 1], {}),
            ("maxpool3d_indices_ceil", "MaxPool", (1, 2, 4, 5, 5), [2, 2, 3], [2, 2, 2],
             [0, 0, 1, 0, 0, 0], {"ceil_mode": 1, "indices": 1}),
            ("averagepool3d_exclude_pad", "AveragePool", (1, 3, 4, 6, 5), [2, 3, 3], [1, 2, 2],
             [1, 1, 1, 0, 1, 1], {}),
            ("averagepool3d_count_include_pad", "AveragePool", (2, 2, 5, 4, 4), [3, 2, 2],
             [2, 2, 2], [1, 0, 1, 1, 1, 0], {"count_include_pad": 1})]:
        r = gen()
        x = float_data(r, xs)
        attrs = {"kernel_shape": _ints(kernel), "strides": _ints(strides), "pads": _ints(pads)}
        ceil_mode = extra.get("ceil_mode", 0)
        if ceil_mode:
            attrs["ceil_mode"] = ("int", 1)
        if op == "MaxPool":
            y, idx = pool_nd_ref(x, "max", kernel, strides, pads, ceil_mode)
            outputs = [("Y", y)] + ([("Indices", idx)] if extra.get("indices") else [])
            add(name, op, 13, [("input", "X", x)], outputs, attrs=attrs, tol=EXACT)
        else:
            include = extra.get("count_include_pad", 0)
            if include:
                attrs["count_include_pad"] = ("int", 1)
            y = pool_nd_ref(x, "avg", kernel, strides, pads, ceil_mode, include)
            add(name, op, 13, [("input", "X", x)], [("Y", y)], attrs=attrs, tol=POOL_AVG_TOL)

    # Resize over volumes (PyTorch's trilinear and 3-D nearest upsampling) and cubic
    # (bicubic) --------------------------------------------------------------------------
    for name, xs, mode, coord, nearest, scales, sizes, cubic in [
            ("resize_trilinear_5d_scales", (1, 2, 3, 4, 5), "linear", "pytorch_half_pixel", None,
             [1.0, 1.0, 2.0, 2.0, 2.0], None, None),
            ("resize_trilinear_5d_align_corners", (1, 1, 4, 3, 5), "linear", "align_corners", None,
             None, [1, 1, 7, 5, 9], None),
            ("resize_nearest_5d_sizes", (2, 1, 3, 3, 4), "nearest", "asymmetric", "floor", None,
             [2, 1, 6, 5, 8], None),
            ("resize_cubic_pytorch_half_pixel", (1, 2, 5, 6), "cubic", "pytorch_half_pixel", None,
             [1.0, 1.0, 2.0, 1.5], None, (-0.75, 0)),
            ("resize_cubic_align_corners", (2, 1, 4, 5), "cubic", "align_corners", None, None,
             [2, 1, 9, 3], (-0.75, 0)),
            ("resize_cubic_exclude_outside", (1, 2, 4, 6), "cubic", "half_pixel", None, None,
             [1, 2, 7, 4], (-0.5, 1)),
            ("resize_cubic_5d_depth_kept", (1, 1, 2, 4, 4), "cubic", "asymmetric", None,
             [1.0, 1.0, 1.0, 2.0, 2.0], None, (-0.75, 0))]:
        r = gen()
        x = float_data(r, xs)
        a, excl = cubic if cubic else (-0.75, 0)
        y = resize_nd_ref(x, mode, coord, nearest or "round_prefer_floor", scales, sizes, a, excl)
        inputs, attrs = _resize_node(x, mode, coord, nearest, scales, sizes)
        if cubic:
            attrs["cubic_coeff_a"] = ("float", a)
            if excl:
                attrs["exclude_outside"] = ("int", 1)
        add(name, "Resize", 13, inputs, [("Y", y)], attrs=attrs, tol=RESIZE_TOL)

    # GridSample (F.grid_sample: spatial transformers, optical flow warps) -----------------
    for name, mode, padding, align in [
            ("gridsample_bilinear_zeros", None, None, 0),
            ("gridsample_bilinear_border_align_corners", "bilinear", "border", 1),
            ("gridsample_nearest_reflection", "nearest", "reflection", 0),
            ("gridsample_bicubic_zeros", "bicubic", "zeros", 0),
            ("gridsample_bicubic_reflection_align_corners", "bicubic", "reflection", 1)]:
        r = gen()
        x = float_data(r, (2, 3, 5, 6))
        grid = r.uniform(-1.3, 1.3, size=(2, 4, 7, 2)).astype(np.float32)
        grid[0, 0, :3] = [[1.0, 1.0], [-1.0, -1.0], [0.0, 0.0]]  # corners and the centre
        y = grid_sample_ref(x, grid, mode or "bilinear", padding or "zeros", align)
        attrs = {}
        if mode:
            attrs["mode"] = ("string", mode)
        if padding:
            attrs["padding_mode"] = ("string", padding)
        if align:
            attrs["align_corners"] = ("int", 1)
        add(name, "GridSample", 16, [("input", "X", x), ("input", "grid", grid)], [("Y", y)],
            attrs=attrs, tol=RESIZE_TOL)

    # 3-D pools whose window is one slice deep (the (1, 3, 3) MaxPool3d of video ResNets):
    # the CPU pools each depth slice as a 2-D plane.
    for name, op, kernel, strides, pads, extra in [
            ("maxpool3d_unit_depth_window", "MaxPool", [1, 3, 3], [1, 2, 2], [0, 1, 1, 0, 1, 1],
             {}),
            ("maxpool3d_unit_depth_window_indices", "MaxPool", [1, 2, 3], [1, 2, 1],
             [0, 0, 1, 0, 1, 1], {"indices": 1}),
            ("averagepool3d_unit_depth_window", "AveragePool", [1, 3, 2], [1, 2, 2],
             [0, 1, 0, 0, 1, 1], {"count_include_pad": 1})]:
        r = gen()
        x = float_data(r, (2, 3, 3, 7, 6))
        attrs = {"kernel_shape": _ints(kernel), "strides": _ints(strides), "pads": _ints(pads)}
        if op == "MaxPool":
            y, idx = pool_nd_ref(x, "max", kernel, strides, pads)
            outputs = [("Y", y)] + ([("Indices", idx)] if extra.get("indices") else [])
            add(name, op, 13, [("input", "X", x)], outputs, attrs=attrs, tol=EXACT)
        else:
            attrs["count_include_pad"] = ("int", 1)
            y = pool_nd_ref(x, "avg", kernel, strides, pads, 0, 1)
            add(name, op, 13, [("input", "X", x)], [("Y", y)], attrs=attrs, tol=POOL_AVG_TOL)

    # Resize to its own size at scale 1 (torchvision detectors' 320 x 320 transform): a
    # copy on both devices, tf_half_pixel_for_nn (which would shift by half a pixel)
    # included; and one dim kept while the other is resized under it.
    for name, mode, coord, nearest, scales, sizes in [
            ("resize_linear_same_size", "linear", "half_pixel", None, None, [1, 3, 5, 6]),
            ("resize_cubic_scale_one", "cubic", "align_corners", None, [1.0, 1.0, 1.0, 1.0], None),
            ("resize_nearest_tf_half_pixel_same_size_ceil", "nearest", "tf_half_pixel_for_nn",
             "round_prefer_ceil", None, [1, 2, 4, 5]),
            ("resize_nearest_tf_half_pixel_width_only_ceil", "nearest", "tf_half_pixel_for_nn",
             "round_prefer_ceil", [1.0, 1.0, 1.0, 1.5], None),
            ("resize_linear_tf_half_pixel_width_only", "linear", "tf_half_pixel_for_nn", None,
             [1.0, 1.0, 1.0, 2.0], None)]:
        r = gen()
        x = float_data(r, tuple(sizes) if sizes else (2, 2, 4, 3))
        y = resize_nd_ref(x, mode, coord, nearest or "round_prefer_floor", scales, sizes, -0.75, 0)
        inputs, attrs = _resize_node(x, mode, coord, nearest, scales, sizes)
        add(name, "Resize", 13, inputs, [("Y", y)], attrs=attrs, tol=RESIZE_TOL)
