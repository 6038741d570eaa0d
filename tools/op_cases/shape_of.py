"""Per-op fixture cases of Shape and Size (see OP_CASE_FAMILIES in tools/gen_models.py)."""
import numpy as np

from gen_models import float_data, EXACT  # noqa: F401


def shape_ref(x, start=0, end=None):
    rank = x.ndim
    end = rank if end is None else end

    def clamp(v):
        v = v + rank if v < 0 else v
        return min(max(v, 0), rank)

    s, e = clamp(start), clamp(end)
    return np.array(x.shape[s:max(e, s)], dtype=np.int64)


def cases(add, rng):
    """Adds this family's OpCases: add(name, op, opset, inputs, outputs, attrs=, tol=)."""
    r = rng()
    x = float_data(r, (2, 3, 4))
    add("shape_fp32_3d", "Shape", 13, [("input", "data", x)], [("shape", shape_ref(x))])
    ids = r.integers(0, 9, size=(5, 1, 7, 2)).astype(np.int64)
    add("shape_int64_4d_opset15", "Shape", 15, [("input", "data", ids)],
        [("shape", shape_ref(ids))])
    add("shape_start_end", "Shape", 15, [("input", "data", ids)],
        [("shape", shape_ref(ids, 1, 3))], attrs={"start": ("int", 1), "end": ("int", 3)})
    add("shape_negative_start", "Shape", 17, [("input", "data", ids)],
        [("shape", shape_ref(ids, -2))], attrs={"start": ("int", -2)})
    add("shape_negative_end", "Shape", 15, [("input", "data", ids)],
        [("shape", shape_ref(ids, 0, -1))], attrs={"end": ("int", -1)})
    add("shape_clamped_range", "Shape", 15, [("input", "data", ids)],
        [("shape", shape_ref(ids, -10, 10))], attrs={"start": ("int", -10), "end": ("int", 10)})
    add("shape_empty_range", "Shape", 15, [("input", "data", ids)],
        [("shape", shape_ref(ids, 3, 1))], attrs={"start": ("int", 3), "end": ("int", 1)})
    mask = r.integers(0, 2, size=(3, 2)).astype(np.bool_)
    add("shape_bool", "Shape", 13, [("input", "data", mask)], [("shape", shape_ref(mask))])
    scalar = np.array(1.5, dtype=np.float32)
    add("shape_scalar", "Shape", 13, [("input", "data", scalar)],
        [("shape", shape_ref(scalar))])
    empty = np.zeros((4, 0, 3), dtype=np.float32)
    add("shape_empty_tensor", "Shape", 13, [("input", "data", empty)],
        [("shape", shape_ref(empty))])

    add("size_fp32_3d", "Size", 13, [("input", "data", x)],
        [("size", np.array(x.size, dtype=np.int64))])
    ints = r.integers(-5, 5, size=(6, 7)).astype(np.int32)
    add("size_int32", "Size", 17, [("input", "data", ints)],
        [("size", np.array(ints.size, dtype=np.int64))])
    add("size_scalar", "Size", 13, [("input", "data", scalar)],
        [("size", np.array(1, dtype=np.int64))])
    add("size_empty_tensor", "Size", 13, [("input", "data", empty)],
        [("size", np.array(0, dtype=np.int64))])
