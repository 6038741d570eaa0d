"""Per-op fixture cases of the conv family (see OP_CASE_FAMILIES in tools/gen_models.py)."""
from gen_models import OpCase, float_data, EXACT, ELEMENTWISE_MATH, GEMM_TOL, NORM_TOL, REDUCE_TOL  # noqa: F401


def cases(add, rng):
    """Adds this family's OpCases: add(name, op, opset, inputs, outputs, attrs=, tol=)."""
