"""Per-op fixture cases of the math family (see OP_CASE_FAMILIES in tools/gen_models.py)."""
import numpy as np

from gen_models import OpCase, float_data, EXACT, ELEMENTWISE_MATH, GEMM_TOL, NORM_TOL, REDUCE_TOL  # noqa: F401

# The family draws from its own generators (seeded here) instead of the shared `rng`, so
# adding or changing a case here never shifts the data of the families generated after it.
_SEED = 7100


def _f64(x):
    return x.astype(np.float64)


def _unary_cases(add, gen):
    x = float_data(gen(), (2, 3, 4), -5.0, 5.0)
    x.flat[:6] = [0.0, -0.0, 0.5, -0.5, 2.0, -2.0]
    pos = float_data(gen(), (3, 5), 0.01, 50.0)
    pos.flat[0] = 1.0
    add("sqrt", "Sqrt", 13, [("input", "X", np.concatenate([pos, np.zeros((1, 5), np.float32)]))],
        [("Y", np.sqrt(np.concatenate([pos, np.zeros((1, 5), np.float32)])))], tol=ELEMENTWISE_MATH)
    e = float_data(gen(), (4, 6), -10.0, 10.0)
    e.flat[:3] = [0.0, -100.0, 80.0]
    add("exp", "Exp", 13, [("input", "X", e)],
        [("Y", np.exp(_f64(e)).astype(np.float32))], tol=ELEMENTWISE_MATH)
    add("log", "Log", 13, [("input", "X", pos)],
        [("Y", np.log(_f64(pos)).astype(np.float32))], tol=ELEMENTWISE_MATH)
    nz = x.copy()
    nz[nz == 0] = 0.25
    add("reciprocal", "Reciprocal", 13, [("input", "X", nz)],
        [("Y", (np.float32(1.0) / nz).astype(np.float32))])
    big = x.copy()
    big.flat[6:9] = [1e7 + 0.5, -3.5, 123456.75]
    add("floor", "Floor", 13, [("input", "X", big)], [("Y", np.floor(big))])
    add("ceil", "Ceil", 13, [("input", "X", big)], [("Y", np.ceil(big))])
    add("neg_fp32", "Neg", 13, [("input", "X", x)], [("Y", -x)])
    i64 = gen().integers(-(1 << 40), 1 << 40, size=(3, 4)).astype(np.int64)
    add("neg_int64", "Neg", 13, [("input", "X", i64)], [("Y", -i64)])
    i32 = gen().integers(-1000, 1000, size=(7,)).astype(np.int32)
    add("abs_int32", "Abs", 13, [("input", "X", i32)], [("Y", np.abs(i32))])
    add("abs_fp32", "Abs", 13, [("input", "X", x)], [("Y", np.abs(x))])
    add("abs_empty", "Abs", 13, [("input", "X", np.zeros((0, 3), np.float32))],
        [("Y", np.zeros((0, 3), np.float32))])


def _activation_cases(add, gen):
    x = float_data(gen(), (2, 3, 5), -6.0, 6.0)
    x.flat[:4] = [0.0, -0.0, 3.0, -3.0]

    def leaky(alpha):
        return np.where(x < 0, np.float32(alpha) * x, x).astype(np.float32)

    add("leakyrelu_default", "LeakyRelu", 13, [("input", "X", x)], [("Y", leaky(0.01))])
    add("leakyrelu_alpha", "LeakyRelu", 16, [("input", "X", x)], [("Y", leaky(0.2))],
        attrs={"alpha": ("float", 0.2)})

    def elu(alpha):
        return np.where(x < 0, alpha * np.expm1(_f64(x)), x).astype(np.float32)

    add("elu_default", "Elu", 13, [("input", "X", x)], [("Y", elu(1.0))], tol=ELEMENTWISE_MATH)
    add("elu_alpha", "Elu", 13, [("input", "X", x)], [("Y", elu(0.5))],
        attrs={"alpha": ("float", 0.5)}, tol=ELEMENTWISE_MATH)

    def hard_sigmoid(alpha, beta):
        return np.clip(np.float64(np.float32(alpha)) * _f64(x) + np.float64(np.float32(beta)),
                       0.0, 1.0)

    add("hardsigmoid_default", "HardSigmoid", 13, [("input", "X", x)],
        [("Y", hard_sigmoid(0.2, 0.5).astype(np.float32))], tol=ELEMENTWISE_MATH)
    add("hardsigmoid_alpha_beta", "HardSigmoid", 13, [("input", "X", x)],
        [("Y", hard_sigmoid(0.5, 0.3).astype(np.float32))],
        attrs={"alpha": ("float", 0.5), "beta": ("float", 0.3)}, tol=ELEMENTWISE_MATH)
    add("hardswish", "HardSwish", 14, [("input", "X", x)],
        [("Y", (_f64(x) * hard_sigmoid(1.0 / 6.0, 0.5)).astype(np.float32))],
        tol=ELEMENTWISE_MATH)

    # Clip: min and max are optional inputs read on the host (initializers).
    lo, hi = np.array(-1.5, np.float32), np.array(2.0, np.float32)
    add("clip_min_max", "Clip", 13,
        [("input", "input", x), ("const", "min", lo), ("const", "max", hi)],
        [("output", np.clip(x, lo, hi))])
    add("clip_min_only", "Clip", 13, [("input", "input", x), ("const", "min", lo)],
        [("output", np.maximum(x, lo))])
    add("clip_no_bounds", "Clip", 13, [("input", "input", x)], [("output", x.copy())])
    # min > max: every element becomes max (min(max(x, min), max)).
    add("clip_min_above_max", "Clip", 13,
        [("input", "input", x), ("const", "min", np.array(1.0, np.float32)),
         ("const", "max", np.array(-1.0, np.float32))],
        [("output", np.full_like(x, -1.0))])

    # PRelu: slope broadcasts to X (unidirectionally).
    img = float_data(gen(), (2, 3, 4, 4))
    for tag, shape in [("channel", (3, 1, 1)), ("scalar", (1,)), ("full", (2, 3, 4, 4)),
                       ("last_dim", (4,))]:
        slope = float_data(gen(), shape, 0.0, 0.5)
        add(f"prelu_{tag}", "PRelu", 16, [("input", "X", img), ("const", "slope", slope)],
            [("Y", np.where(img < 0, img * slope, img).astype(np.float32))])


def _binary_cases(add, gen):
    r = gen()
    base = float_data(r, (2, 3, 4), 0.1, 3.0)
    ex = float_data(r, (4,), -2.0, 2.0)
    add("pow_fp32_bcast", "Pow", 13, [("input", "X", base), ("input", "Y", ex)],
        [("Z", np.power(_f64(base), _f64(ex)).astype(np.float32))], tol=ELEMENTWISE_MATH)
    neg = float_data(r, (2, 4), -3.0, 3.0)
    iex = np.array([[-2], [3]], np.int64)
    add("pow_int64_exponent", "Pow", 15, [("input", "X", neg), ("input", "Y", iex)],
        [("Z", np.power(_f64(neg), _f64(iex)).astype(np.float32))], tol=ELEMENTWISE_MATH)
    add("pow_scalar_square", "Pow", 13,
        [("input", "X", neg), ("const", "Y", np.array(2.0, np.float32))],
        [("Z", (_f64(neg) ** 2).astype(np.float32))], tol=ELEMENTWISE_MATH)
    i32 = np.array([0, 1, 3, 2], np.int32)
    add("pow_int32_exponent", "Pow", 13, [("input", "X", neg), ("input", "Y", i32)],
        [("Z", np.power(_f64(neg), _f64(i32)).astype(np.float32))], tol=ELEMENTWISE_MATH)

    # Min / Max: variadic with numpy broadcasting.
    a, b, c = float_data(r, (2, 3, 4)), float_data(r, (3, 1)), float_data(r, (4,))
    b.flat[0] = a.flat[0]  # a tie
    for op, fn in (("Min", np.minimum), ("Max", np.maximum)):
        low = op.lower()
        add(f"{low}_one_input", op, 13, [("input", "data_0", a)], [(low, a.copy())])
        add(f"{low}_two_bcast", op, 13, [("input", "data_0", a), ("input", "data_1", b)],
            [(low, fn(a, b))])
        add(f"{low}_three_bcast", op, 13,
            [("input", "data_0", b), ("input", "data_1", a), ("const", "data_2", c)],
            [(low, fn(fn(b, a), c))])
    i64a = r.integers(-(1 << 40), 1 << 40, size=(3, 4)).astype(np.int64)
    i64b = r.integers(-(1 << 40), 1 << 40, size=(4,)).astype(np.int64)
    add("max_int64", "Max", 13, [("input", "data_0", i64a), ("input", "data_1", i64b)],
        [("max", np.maximum(i64a, i64b))])
    i32a = r.integers(-50, 50, size=(2, 1, 3)).astype(np.int32)
    i32b = r.integers(-50, 50, size=(4, 1)).astype(np.int32)
    add("min_int32", "Min", 13, [("input", "data_0", i32a), ("input", "data_1", i32b)],
        [("min", np.minimum(i32a, i32b))])

    # Comparisons: BOOL out, with ties.
    x = np.round(float_data(r, (3, 4), -2.0, 2.0))
    y = np.round(float_data(r, (4,), -2.0, 2.0))
    for op, fn in (("Equal", np.equal), ("Less", np.less), ("Greater", np.greater)):
        add(f"{op.lower()}_fp32_bcast", op, 13, [("input", "A", x), ("input", "B", y)],
            [("C", fn(x, y))])
    ia = r.integers(-3, 3, size=(2, 3)).astype(np.int64)
    ib = r.integers(-3, 3, size=(2, 1)).astype(np.int64)
    for op, fn in (("Equal", np.equal), ("Less", np.less), ("Greater", np.greater)):
        add(f"{op.lower()}_int64", op, 13, [("input", "A", ia), ("input", "B", ib)],
            [("C", fn(ia, ib))])
    ja = r.integers(-3, 3, size=(5,)).astype(np.int32)
    add("less_int32_scalar", "Less", 13,
        [("input", "A", ja), ("const", "B", np.array(0, np.int32))], [("C", ja < 0)])
    ba = np.array([[True, False, True], [False, False, True]])
    bb = np.array([True, False, False])
    add("equal_bool", "Equal", 13, [("input", "A", ba), ("input", "B", bb)], [("C", ba == bb)])

    # Logic.
    add("not", "Not", 13, [("input", "X", ba)], [("Y", np.logical_not(ba))])
    bc = np.array([[True], [False]])
    add("and_bcast", "And", 13, [("input", "A", ba), ("input", "B", bc)],
        [("C", np.logical_and(ba, bc))])
    add("or_bcast", "Or", 13, [("input", "A", ba), ("input", "B", bb)],
        [("C", np.logical_or(ba, bb))])

    # Where: three-way broadcasting, several element sizes.
    cond = r.integers(0, 2, size=(2, 1, 4)).astype(np.bool_)
    wx, wy = float_data(r, (3, 1)), float_data(r, (1, 3, 4))
    add("where_fp32_bcast3", "Where", 16,
        [("input", "condition", cond), ("input", "X", wx), ("input", "Y", wy)],
        [("output", np.where(cond, wx, wy))])
    lx = r.integers(-(1 << 40), 1 << 40, size=(2, 3, 4)).astype(np.int64)
    add("where_int64_scalar_y", "Where", 13,
        [("input", "condition", cond), ("input", "X", lx),
         ("const", "Y", np.array(-1, np.int64))],
        [("output", np.where(cond, lx, np.int64(-1)))])
    add("where_bool_values", "Where", 13,
        [("input", "condition", ba), ("input", "X", bb), ("input", "Y", np.logical_not(ba))],
        [("output", np.where(ba, bb, np.logical_not(ba)))])
    hx = float_data(r, (4,)).astype(np.float16)
    add("where_fp16", "Where", 13,
        [("input", "condition", cond), ("input", "X", hx), ("input", "Y", np.float16(0.5) * hx)],
        [("output", np.where(cond, hx, np.float16(0.5) * hx))])
    add("where_empty", "Where", 13,
        [("input", "condition", np.zeros((0, 4), np.bool_)), ("input", "X", wy[0, :1]),
         ("input", "Y", np.zeros((1, 4), np.float32))],
        [("output", np.zeros((0, 4), np.float32))])


def _log_softmax(x, axis):
    x = _f64(x)
    m = x.max(axis=axis, keepdims=True)
    return (x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))).astype(np.float32)


def _topk(x, k, axis, largest):
    # Stable sort on the key gives ties in index order; NaN-free data.
    key = -x if largest else x
    idx = np.argsort(key, axis=axis, kind="stable")
    idx = np.take(idx, np.arange(k), axis=axis)
    return np.take_along_axis(x, idx, axis=axis), idx.astype(np.int64)


def _cumsum(x, axis, exclusive, reverse):
    y = np.flip(x, axis) if reverse else x
    s = np.cumsum(y, axis=axis, dtype=x.dtype)
    if exclusive:
        s = np.concatenate([np.zeros_like(np.take(s, [0], axis=axis)),
                            np.take(s, np.arange(s.shape[axis] - 1), axis=axis)], axis=axis)
    return np.flip(s, axis) if reverse else s


def _reduce_cases(add, gen):
    r = gen()
    x = float_data(r, (2, 3, 4))
    for op, fn in (("ReduceMax", np.max), ("ReduceMin", np.min)):
        low = op.lower()
        add(f"{low}_axis1_keepdims", op, 13, [("input", "data", x)],
            [("reduced", fn(x, axis=1, keepdims=True))], attrs={"axes": ("ints", [1])})
        add(f"{low}_axes02_nokeep", op, 17, [("input", "data", x)],
            [("reduced", fn(x, axis=(0, 2)))],
            attrs={"axes": ("ints", [0, -1]), "keepdims": ("int", 0)})
        add(f"{low}_all_default", op, 13, [("input", "data", x)],
            [("reduced", fn(x, axis=(0, 1, 2), keepdims=True))])
    i64 = r.integers(-(1 << 40), 1 << 40, size=(3, 5)).astype(np.int64)
    add("reducemax_int64_last", "ReduceMax", 13, [("input", "data", i64)],
        [("reduced", i64.max(axis=-1))], attrs={"axes": ("ints", [-1]), "keepdims": ("int", 0)})
    add("reducemin_int64_first", "ReduceMin", 13, [("input", "data", i64)],
        [("reduced", i64.min(axis=0, keepdims=True))], attrs={"axes": ("ints", [0])})

    # LogSoftmax.
    s = float_data(r, (2, 3, 5), -4.0, 4.0)
    add("logsoftmax_last_axis", "LogSoftmax", 13, [("input", "input", s)],
        [("output", _log_softmax(s, -1))], tol=ELEMENTWISE_MATH)
    add("logsoftmax_axis1", "LogSoftmax", 13, [("input", "input", s)],
        [("output", _log_softmax(s, 1))], attrs={"axis": ("int", 1)}, tol=ELEMENTWISE_MATH)
    big = np.array([[1000.0, 999.0, -1000.0, 0.0], [-50.0, -50.0, -50.0, -50.0]], np.float32)
    add("logsoftmax_large_values", "LogSoftmax", 13, [("input", "input", big)],
        [("output", _log_softmax(big, -1))], tol=ELEMENTWISE_MATH)

    # ArgMax, with ties.
    t = np.round(float_data(r, (3, 4, 5), -3.0, 3.0))
    add("argmax_default_axis0", "ArgMax", 13, [("input", "data", t)],
        [("reduced", np.argmax(t, axis=0)[None].astype(np.int64))])
    add("argmax_last_nokeep", "ArgMax", 13, [("input", "data", t)],
        [("reduced", np.argmax(t, axis=-1).astype(np.int64))],
        attrs={"axis": ("int", -1), "keepdims": ("int", 0)})
    last = t.shape[1] - 1 - np.argmax(np.flip(t, axis=1), axis=1)
    add("argmax_select_last_index", "ArgMax", 13, [("input", "data", t)],
        [("reduced", last[:, None, :].astype(np.int64))],
        attrs={"axis": ("int", 1), "select_last_index": ("int", 1)})
    ti = r.integers(-3, 3, size=(4, 6)).astype(np.int64)
    add("argmax_int64", "ArgMax", 13, [("input", "data", ti)],
        [("reduced", np.argmax(ti, axis=1)[:, None].astype(np.int64))],
        attrs={"axis": ("int", 1)})

    # TopK: K is an initializer; ties break by lower index.
    tk = np.round(float_data(r, (3, 8), -4.0, 4.0))
    for tag, k, axis, largest, attrs in [
        ("largest_last_axis", 3, -1, True, {}),
        ("smallest", 4, 1, False, {"largest": ("int", 0), "axis": ("int", 1)}),
        ("axis0", 2, 0, True, {"axis": ("int", 0)}),
        ("k_zero", 0, -1, True, {}),
        ("k_all_unsorted", 8, -1, True, {"sorted": ("int", 0)}),
    ]:
        v, i = _topk(tk, k, axis, largest)
        add(f"topk_{tag}", "TopK", 13,
            [("input", "X", tk), ("const", "K", np.array([k], np.int64))],
            [("Values", v), ("Indices", i)], attrs=attrs)
    t3 = r.integers(-5, 5, size=(2, 6, 3)).astype(np.int64)
    v, i = _topk(t3, 2, 1, True)
    add("topk_int64_middle_axis", "TopK", 13,
        [("input", "X", t3), ("const", "K", np.array([2], np.int64))],
        [("Values", v), ("Indices", i)], attrs={"axis": ("int", 1)})

    # CumSum: axis is an initializer.
    c = float_data(r, (3, 4))
    for tag, axis, excl, rev in [("axis0", 0, 0, 0), ("axis1_exclusive", 1, 1, 0),
                                 ("reverse", 1, 0, 1), ("exclusive_reverse", 0, 1, 1)]:
        attrs = {}
        if excl:
            attrs["exclusive"] = ("int", 1)
        if rev:
            attrs["reverse"] = ("int", 1)
        add(f"cumsum_{tag}", "CumSum", 14,
            [("input", "x", c), ("const", "axis", np.array(axis, np.int64))],
            [("y", _cumsum(c, axis, excl, rev))], attrs=attrs, tol=REDUCE_TOL)
    ci = r.integers(-100, 100, size=(2, 3, 4)).astype(np.int32)
    add("cumsum_int32_negative_axis", "CumSum", 13,
        [("input", "x", ci), ("const", "axis", np.array(-2, np.int32))],
        [("y", _cumsum(ci, 1, 0, 0))], tol=REDUCE_TOL)


def cases(add, rng):
    """Adds this family's OpCases: add(name, op, opset, inputs, outputs, attrs=, tol=)."""
    del rng  # see _SEED
    seed = [_SEED]

    def gen():
        seed[0] += 1
        return np.random.default_rng(seed[0])

    _unary_cases(add, gen)
    _activation_cases(add, gen)
    _binary_cases(add, gen)
    _reduce_cases(add, gen)
    _mod_cases(add, gen)


def _mod_cases(add, gen):
    """Mod: fmod 0 takes the divisor's sign (numpy's mod), fmod 1 the dividend's (fmod).

    Integer division by 0 (and by -1) is 0 here, as in kernels/math_ops.h; numpy agrees
    on x % 0 for integers.
    """
    r = gen()
    a = r.integers(-50, 50, size=(2, 3, 4)).astype(np.int64)
    b = np.array([7, -7, 3, -2], np.int64)
    add("mod_int64_bcast", "Mod", 13, [("input", "A", a), ("input", "B", b)],
        [("C", np.mod(a, b))])
    a = np.array([[-7, 7, -7, 7, 5, -(1 << 31)], [9, -9, 0, 4, 6, -(1 << 31)]], np.int32)
    b = np.array([3, 3, -3, -3, 0, -1], np.int32)
    with np.errstate(divide="ignore"):
        add("mod_int32_zero_and_minus_one", "Mod", 13, [("input", "A", a), ("input", "B", b)],
            [("C", np.where(b == -1, 0, np.mod(a, np.where(b == 0, 1, b)) * (b != 0))
              .astype(np.int32))])
        add("mod_int32_fmod", "Mod", 13, [("input", "A", a), ("input", "B", b)],
            [("C", np.where(b == -1, 0, np.fmod(a, np.where(b == 0, 1, b)) * (b != 0))
              .astype(np.int32))], attrs={"fmod": ("int", 1)})
    x = float_data(r, (3, 5), -10.0, 10.0)
    y = (r.uniform(0.5, 3.0, size=(5,)) * r.choice([-1.0, 1.0], size=(5,))).astype(np.float32)
    add("mod_fp32_fmod", "Mod", 13, [("input", "A", x), ("input", "B", y)],
        [("C", np.fmod(x, y))], attrs={"fmod": ("int", 1)})
    _trig_round_softplus_sign_cases(add, gen)


def _trig_round_softplus_sign_cases(add, gen):
    """Sin and Cos (positional and rotary embeddings computed in the graph), Round (halves
    to even), Softplus (Mish's inner op) and Sign."""
    r = gen()
    x = float_data(r, (3, 7), -20.0, 20.0)
    x.flat[:3] = [0.0, 3.14159265, -1.5707963]
    add("sin", "Sin", 13, [("input", "input", x)],
        [("output", np.sin(_f64(x)).astype(np.float32))], tol=ELEMENTWISE_MATH)
    add("cos", "Cos", 13, [("input", "input", x)],
        [("output", np.cos(_f64(x)).astype(np.float32))], tol=ELEMENTWISE_MATH)
    h = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 1e7 + 1.0, -3.7, 2.2],
                 np.float32)
    add("round_halves_to_even", "Round", 13, [("input", "X", h)], [("Y", np.round(h))])
    s = float_data(r, (2, 8), -30.0, 30.0)
    s.flat[:4] = [0.0, 100.0, -100.0, 1e-3]
    add("softplus", "Softplus", 13, [("input", "X", s)],
        [("Y", np.logaddexp(0.0, _f64(s)).astype(np.float32))], tol=ELEMENTWISE_MATH)
    g = x.copy()
    g.flat[3] = 0.0
    add("sign_fp32", "Sign", 13, [("input", "input", g)], [("output", np.sign(g))])
    gi = np.array([[-7, 0, 3], [1 << 40, -(1 << 40), -1]], np.int64)
    add("sign_int64", "Sign", 13, [("input", "input", gi)], [("output", np.sign(gi))])
    _fold_reduce_cases(add, gen)


def _fold_reduce_cases(add, gen):
    """ReduceL2 (F.normalize), ReduceSumSquare, ReduceLogSumExp (torch.logsumexp, here with
    values whose exp overflows FP32), ReduceProd, and ArgMin with ties."""
    r = gen()
    x = float_data(r, (2, 3, 4))
    add("reducel2_last_axis", "ReduceL2", 13, [("input", "data", x)],
        [("reduced", np.sqrt((_f64(x) ** 2).sum(axis=-1, keepdims=True)).astype(np.float32))],
        attrs={"axes": ("ints", [-1])}, tol=REDUCE_TOL)
    add("reducesumsquare_outer_axes", "ReduceSumSquare", 13, [("input", "data", x)],
        [("reduced", (_f64(x) ** 2).sum(axis=(0, 2)).astype(np.float32))],
        attrs={"axes": ("ints", [0, 2]), "keepdims": ("int", 0)}, tol=REDUCE_TOL)
    big = float_data(r, (3, 5), -5.0, 5.0)
    big[0] += 100.0
    big[1, 2] = -np.inf
    lse = np.log(np.exp(_f64(big) - _f64(big).max(axis=1, keepdims=True)).sum(axis=1)) + \
        _f64(big).max(axis=1)
    add("reducelogsumexp_large", "ReduceLogSumExp", 13, [("input", "data", big)],
        [("reduced", lse.astype(np.float32))], attrs={"axes": ("ints", [1]), "keepdims": ("int", 0)},
        tol=REDUCE_TOL)
    p = float_data(r, (2, 6, 3), 0.5, 1.5)
    add("reduceprod_middle_axis", "ReduceProd", 13, [("input", "data", p)],
        [("reduced", _f64(p).prod(axis=1, keepdims=True).astype(np.float32))],
        attrs={"axes": ("ints", [1])}, tol=REDUCE_TOL)
    a = np.array([[3.0, 1.0, 1.0, 2.0], [0.5, 0.5, -4.0, -4.0]], np.float32)
    add("argmin_first_of_ties", "ArgMin", 13, [("input", "data", a)],
        [("reduced", np.argmin(a, axis=1).reshape(2, 1).astype(np.int64))],
        attrs={"axis": ("int", 1)})
    ai = np.array([[5, -2, 7, -2], [9, 9, 9, 1]], np.int64)
    last = ai.shape[1] - 1 - np.argmin(ai[:, ::-1], axis=1)
    add("argmin_int64_select_last", "ArgMin", 13, [("input", "data", ai)],
        [("reduced", last.astype(np.int64))],
        attrs={"axis": ("int", 1), "keepdims": ("int", 0), "select_last_index": ("int", 1)})
    _trig_compare_class_cases(add, gen)


def _trig_compare_class_cases(add, gen):
    """Tan, Asin, Acos, Atan; Selu and Celu (nn.SELU, nn.CELU); LessOrEqual and
    GreaterOrEqual (torch.le / ge at opset 12+); Xor; IsNaN and IsInf (torch.isnan /
    isinf); ReduceL1 (torch.norm with p=1)."""
    r = gen()
    x = float_data(r, (3, 7), -1.4, 1.4)
    x.flat[:3] = [0.0, 1.0, -1.0]
    for name, op, fn in (("tan", "Tan", np.tan), ("asin", "Asin", np.arcsin),
                         ("acos", "Acos", np.arccos)):
        v = x if op == "Tan" else np.clip(x, -1.0, 1.0)
        add(name, op, 13, [("input", "input", v)],
            [("output", fn(_f64(v)).astype(np.float32))], tol=ELEMENTWISE_MATH)
    wide = float_data(r, (2, 9), -50.0, 50.0)
    add("atan", "Atan", 13, [("input", "input", wide)],
        [("output", np.arctan(_f64(wide)).astype(np.float32))], tol=ELEMENTWISE_MATH)
    a = float_data(r, (3, 6), -4.0, 3.0)
    a.flat[0] = 0.0
    alpha, gamma = 1.6732632423543772, 1.0507009873554805
    selu = gamma * np.where(_f64(a) > 0, _f64(a), alpha * np.expm1(_f64(a)))
    add("selu_default", "Selu", 13, [("input", "X", a)], [("Y", selu.astype(np.float32))],
        tol=ELEMENTWISE_MATH)
    selu2 = 2.0 * np.where(_f64(a) > 0, _f64(a), 0.5 * np.expm1(_f64(a)))
    add("selu_alpha_gamma", "Selu", 13, [("input", "X", a)], [("Y", selu2.astype(np.float32))],
        attrs={"alpha": ("float", 0.5), "gamma": ("float", 2.0)}, tol=ELEMENTWISE_MATH)
    celu = np.maximum(0, _f64(a)) + np.minimum(0, 1.5 * np.expm1(_f64(a) / 1.5))
    add("celu_alpha", "Celu", 13, [("input", "X", a)], [("Y", celu.astype(np.float32))],
        attrs={"alpha": ("float", 1.5)}, tol=ELEMENTWISE_MATH)
    p = float_data(r, (2, 3, 4))
    q = p[:, :1, :].copy()
    p.flat[:4] = q.flat[:4]  # some equal pairs, where <= and < differ
    for op, fn in (("LessOrEqual", np.less_equal), ("GreaterOrEqual", np.greater_equal)):
        add(f"{op.lower()}_bcast", op, 13, [("input", "A", p), ("input", "B", q)],
            [("C", fn(p, q))])
    pi = r.integers(-3, 3, size=(4, 5)).astype(np.int64)
    qi = r.integers(-3, 3, size=(5,)).astype(np.int64)
    add("lessorequal_int64", "LessOrEqual", 13, [("input", "A", pi), ("input", "B", qi)],
        [("C", np.less_equal(pi, qi))])
    ba, bb = r.integers(0, 2, size=(3, 4)).astype(bool), r.integers(0, 2, size=(4,)).astype(bool)
    add("xor_bcast", "Xor", 13, [("input", "A", ba), ("input", "B", bb)],
        [("C", np.logical_xor(ba, bb))])
    f = np.array([0.0, np.nan, np.inf, -np.inf, 1.0, -2.5, np.float32(3e38), -0.0], np.float32)
    add("isnan", "IsNaN", 13, [("input", "X", f)], [("Y", np.isnan(f))])
    add("isinf", "IsInf", 13, [("input", "X", f)], [("Y", np.isinf(f))])
    add("isinf_positive_only", "IsInf", 13, [("input", "X", f)], [("Y", f == np.inf)],
        attrs={"detect_negative": ("int", 0)})
    m = float_data(r, (2, 5, 3))
    add("reducel1_middle_axis", "ReduceL1", 13, [("input", "data", m)],
        [("reduced", np.abs(_f64(m)).sum(axis=1, keepdims=True).astype(np.float32))],
        attrs={"axes": ("ints", [1])}, tol=REDUCE_TOL)
    # ReduceProd of a Shape (torchvision's numel() == 0 tests), and an INT32 product that
    # wraps past 2^31 as two's complement.
    s = np.array([[3, 4, 5], [2, 0, 7]], np.int64)
    add("reduceprod_int64_rows", "ReduceProd", 13, [("input", "data", s)],
        [("reduced", np.prod(s, axis=1, keepdims=False))],
        attrs={"axes": ("ints", [1]), "keepdims": ("int", 0)}, tol=REDUCE_TOL)
    w32 = np.array([46341, 46341, 3, -7], np.int32)
    add("reduceprod_int32_wraps", "ReduceProd", 13, [("input", "data", w32)],
        [("reduced", np.array([np.int64(46341) * 46341 * 3 * -7], np.int64)
          .astype(np.uint64).astype(np.uint32).view(np.int32).reshape(1))], tol=REDUCE_TOL)
    # ReduceSum of a padding mask (mask.sum(1)) and of INT32 counts past 2^31 (wrapping).
    mk = (r.random((4, 7)) < 0.6).astype(np.int64)
    add("reducesum_int64_mask_rows", "ReduceSum", 13,
        [("input", "data", mk), ("const", "axes", np.array([1], np.int64))],
        [("reduced", mk.sum(axis=1, keepdims=True))], tol=REDUCE_TOL)
    c32 = np.array([[2 ** 30, 2 ** 30, 2 ** 30], [-5, 7, 1]], np.int32)
    add("reducesum_int32_wraps", "ReduceSum", 13,
        [("input", "data", c32), ("const", "axes", np.array([-1], np.int64))],
        [("reduced", c32.astype(np.int64).sum(axis=1).astype(np.uint64).astype(np.uint32)
          .view(np.int32))], attrs={"keepdims": ("int", 0)}, tol=REDUCE_TOL)
    # ReduceMean of nothing (an empty EmbeddingBag's bag, as torch exports it): 0, as
    # ONNX Runtime and PyTorch give, not numpy's NaN.
    add("reducemean_empty_axis", "ReduceMean", 13, [("input", "data", np.zeros((0, 3), np.float32))],
        [("reduced", np.zeros((3,), np.float32))],
        attrs={"axes": ("ints", [0]), "keepdims": ("int", 0)}, tol=REDUCE_TOL)
