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


def cases(add, rng):
    """Adds this family's OpCases: add(name, op, opset, inputs, outputs, attrs=, tol=)."""
    del rng  # see _SEED
    seed = [_SEED]

    def gen():
        seed[0] += 1
        return np.random.default_rng(seed[0])

    _unary_cases(add, gen)
    _activation_cases(add, gen)
