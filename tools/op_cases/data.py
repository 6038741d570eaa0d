"""Per-op fixture cases of the data family (see OP_CASE_FAMILIES in tools/gen_models.py)."""
from gen_models import OpCase, float_data, EXACT, ELEMENTWISE_MATH, GEMM_TOL, NORM_TOL, REDUCE_TOL  # noqa: F401

import numpy as np

I64_MAX = np.iinfo(np.int64).max
I64_MIN = np.iinfo(np.int64).min


def i64(*values):
    return np.array(values, np.int64)


def np_slice(x, starts, ends, axes=None, steps=None):
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    index = [slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        # Python slices clamp like ONNX once the int64 extremes are out of the way.
        clamp = lambda v: max(min(int(v), 2 ** 40), -2 ** 40)  # noqa: E731
        index[a] = slice(clamp(s), clamp(e), int(st))
    return x[tuple(index)]


def np_range(start, limit, delta, dtype):
    n = max(int(np.ceil((float(limit) - float(start)) / float(delta))), 0)
    if np.dtype(dtype).kind == "f":
        return (float(start) + np.arange(n, dtype=np.float64) * float(delta)).astype(dtype)
    return (int(start) + np.arange(n, dtype=np.int64) * int(delta)).astype(dtype)


def cases(add, _shared_rng):
    """Adds this family's OpCases: add(name, op, opset, inputs, outputs, attrs=, tol=).

    Draws from its own seeded generators instead of the shared counter, so adding a case
    here does not shift the random data of the families generated after this one.
    """
    seed = [7000]

    def rng():
        seed[0] += 1
        return np.random.default_rng(seed[0])

    # Slice ---------------------------------------------------------------------------
    x = float_data(rng(), (4, 5, 6))
    for name, starts, ends, axes, steps in [
        ("slice_basic", [1, 0], [3, 4], [0, 1], None),
        ("slice_negative_indices", [-3], [-1], [-1], None),
        ("slice_int64_max_end", [2], [I64_MAX], [1], None),
        ("slice_negative_step", [I64_MAX, 4], [I64_MIN, 0], [0, 2], [-1, -2]),
        ("slice_steps_clamped", [0, -100, 1], [100, 100, 6], [0, 1, 2], [2, 3, 2]),
        ("slice_empty_result", [3], [1], [2], None),
    ]:
        inputs = [("input", "data", x), ("const", "starts", i64(*starts)),
                  ("const", "ends", i64(*ends))]
        if axes is not None:
            inputs.append(("const", "axes", i64(*axes)))
        if steps is not None:
            inputs.append(("const", "steps", i64(*steps)))
        add(name, "Slice", 13, inputs, [("output", np_slice(x, starts, ends, axes, steps))])
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    add("slice_int32_no_axes", "Slice", 13,
        [("input", "data", x), ("const", "starts", i64(0, 1)), ("const", "ends", i64(2, 3))],
        [("output", x[0:2, 1:3])])
    xb = rng().random((3, 4)) > 0.5
    add("slice_bool_step", "Slice", 13,
        [("input", "data", xb), ("const", "starts", i64(0)), ("const", "ends", i64(4)),
         ("const", "axes", i64(1)), ("const", "steps", i64(3))],
        [("output", xb[:, 0:4:3])])

    # Expand --------------------------------------------------------------------------
    x = float_data(rng(), (3, 1))
    add("expand_bidirectional", "Expand", 13, [("input", "input", x), ("const", "shape", i64(2, 1, 4))],
        [("output", x * np.ones((2, 1, 4), np.float32))])
    x = np.array([1, -2, 3], np.int64)
    add("expand_int64_smaller_shape", "Expand", 13,
        [("input", "input", x), ("const", "shape", i64(2, 1))],
        [("output", np.broadcast_to(x, (2, 3)).copy())])
    x = float_data(rng(), (2, 3)).astype(np.float16)
    add("expand_fp16_rank_up", "Expand", 13, [("input", "input", x), ("const", "shape", i64(4, 2, 3))],
        [("output", np.broadcast_to(x, (4, 2, 3)).copy())])

    # ConstantOfShape -----------------------------------------------------------------
    add("constantofshape_default", "ConstantOfShape", 13, [("const", "input", i64(2, 3))],
        [("output", np.zeros((2, 3), np.float32))])
    add("constantofshape_int64_value", "ConstantOfShape", 13, [("const", "input", i64(3, 1, 2))],
        [("output", np.full((3, 1, 2), -7, np.int64))],
        attrs={"value": ("tensor", np.array([-7], np.int64))})
    add("constantofshape_fp32_fields", "ConstantOfShape", 13, [("const", "input", i64(4))],
        [("output", np.full((4,), 0.5, np.float32))],
        attrs={"value": ("tensor_fields", np.array([0.5], np.float32))})
    add("constantofshape_bool_empty", "ConstantOfShape", 13, [("const", "input", i64(2, 0))],
        [("output", np.zeros((2, 0), np.bool_))],
        attrs={"value": ("tensor", np.array([True]))})
    add("constantofshape_int32_scalar_shape", "ConstantOfShape", 13,
        [("const", "input", np.zeros((0,), np.int64))],
        [("output", np.array(3, np.int32))], attrs={"value": ("tensor_fields", np.array([3], np.int32))})

    # Range ---------------------------------------------------------------------------
    for name, dtype, start, limit, delta in [
        ("range_int64", np.int64, 0, 10, 3),
        ("range_int64_negative_delta", np.int64, 5, -4, -2),
        ("range_int32_empty", np.int32, 5, 5, 1),
        ("range_fp32", np.float32, 0.5, 3.2, 0.25),
        ("range_fp64_negative", np.float64, 1.0, -1.0, -0.3),
    ]:
        add(name, "Range", 13,
            [("const", "start", np.array(start, dtype)), ("const", "limit", np.array(limit, dtype)),
             ("const", "delta", np.array(delta, dtype))],
            [("output", np_range(np.array(start, dtype), np.array(limit, dtype),
                                 np.array(delta, dtype), dtype))])

    # Tile ----------------------------------------------------------------------------
    x = float_data(rng(), (2, 3))
    add("tile_2d", "Tile", 13, [("input", "input", x), ("const", "repeats", i64(2, 3))],
        [("output", np.tile(x, (2, 3)))])
    x = np.arange(6, dtype=np.int64).reshape(1, 2, 3)
    add("tile_int64_ones_and_zero", "Tile", 13, [("input", "input", x), ("const", "repeats", i64(3, 1, 0))],
        [("output", np.tile(x, (3, 1, 0)))])
    x = float_data(rng(), (2, 1, 2)).astype(np.float16)
    add("tile_fp16_3d", "Tile", 13, [("input", "input", x), ("const", "repeats", i64(1, 4, 2))],
        [("output", np.tile(x, (1, 4, 2)))])

    # Split ---------------------------------------------------------------------------
    x = float_data(rng(), (4, 6))
    add("split_equal_axis1", "Split", 13, [("input", "input", x)],
        [("out0", x[:, :2]), ("out1", x[:, 2:4]), ("out2", x[:, 4:])], attrs={"axis": ("int", 1)})
    add("split_sizes_negative_axis", "Split", 13, [("input", "input", x), ("const", "split", i64(1, 0, 5))],
        [("out0", x[:, :1]), ("out1", x[:, 1:1]), ("out2", x[:, 1:])], attrs={"axis": ("int", -1)})
    xi = np.arange(24, dtype=np.int32).reshape(4, 3, 2)
    add("split_int32_axis0", "Split", 13, [("input", "input", xi), ("const", "split", i64(3, 1))],
        [("out0", xi[:3]), ("out1", xi[3:])])

    # Pad -----------------------------------------------------------------------------
    x = float_data(rng(), (2, 3, 4))
    add("pad_constant_default", "Pad", 13, [("input", "data", x), ("const", "pads", i64(0, 1, 2, 1, 0, 1))],
        [("output", np.pad(x, ((0, 1), (1, 0), (2, 1))))])
    add("pad_constant_value_and_crop", "Pad", 13,
        [("input", "data", x), ("const", "pads", i64(1, -1, 0, 0, 0, -2)),
         ("const", "constant_value", np.array(1.5, np.float32))],
        [("output", np.pad(x[:, 1:, :2], ((1, 0), (0, 0), (0, 0)), constant_values=1.5))])
    add("pad_reflect", "Pad", 13, [("input", "data", x), ("const", "pads", i64(0, 2, 3, 0, 1, 2))],
        [("output", np.pad(x, ((0, 0), (2, 1), (3, 2)), mode="reflect"))],
        attrs={"mode": ("string", "reflect")})
    add("pad_edge", "Pad", 13, [("input", "data", x), ("const", "pads", i64(1, 0, 2, 2, 1, 0))],
        [("output", np.pad(x, ((1, 2), (0, 1), (2, 0)), mode="edge"))],
        attrs={"mode": ("string", "edge")})
    xi = np.arange(6, dtype=np.int64).reshape(2, 3)
    add("pad_int64_constant", "Pad", 13,
        [("input", "data", xi), ("const", "pads", i64(1, 1, 0, 2)),
         ("const", "constant_value", np.array(-9, np.int64))],
        [("output", np.pad(xi, ((1, 0), (1, 2)), constant_values=-9))])

    # Gather: negative indices count from the end --------------------------------------
    x = float_data(rng(), (4, 3))
    idx = np.array([[-1, 0], [-4, 2]], np.int64)
    add("gather_negative_indices", "Gather", 13, [("input", "data", x), ("const", "indices", idx)],
        [("output", np.take(x, idx, axis=0))])
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    idx = np.array([-2, 3], np.int32)
    add("gather_negative_int32_axis_last", "Gather", 13,
        [("input", "data", x), ("const", "indices", idx)], [("output", np.take(x, idx, axis=-1))],
        attrs={"axis": ("int", -1)})
    # Slice with INT32 index inputs, FP16 data.
    x = float_data(rng(), (3, 8)).astype(np.float16)
    add("slice_fp16_int32_indices", "Slice", 13,
        [("input", "data", x), ("const", "starts", np.array([-1, 6], np.int32)),
         ("const", "ends", np.array([-4, 1], np.int32)), ("const", "axes", np.array([0, 1], np.int32)),
         ("const", "steps", np.array([-1, -2], np.int32))],
        [("output", x[-1:-4:-1, 6:1:-2])])

    # Trilu ---------------------------------------------------------------------------
    x = float_data(rng(), (2, 4, 5))
    add("trilu_upper_default", "Trilu", 14, [("input", "input", x)], [("output", np.triu(x))])
    add("trilu_lower_k1", "Trilu", 14, [("input", "input", x), ("const", "k", np.array(1, np.int64))],
        [("output", np.tril(x, 1))], attrs={"upper": ("int", 0)})
    xi = np.arange(1, 13, dtype=np.int32).reshape(4, 3)
    add("trilu_upper_negative_k_int32", "Trilu", 14,
        [("input", "input", xi), ("const", "k", np.array(-1, np.int64))], [("output", np.triu(xi, -1))])

    # DepthToSpace / SpaceToDepth: the ONNX definitions' reshape-transpose-reshape ------
    def depth_to_space(x, b, mode):
        n, c, h, w = x.shape
        if mode == "DCR":
            t = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
        else:
            t = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
        return t.reshape(n, c // (b * b), h * b, w * b)

    def space_to_depth(x, b):
        n, c, h, w = x.shape
        t = x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
        return t.reshape(n, c * b * b, h // b, w // b)

    x = float_data(rng(), (1, 8, 2, 3))
    add("depthtospace_dcr_default", "DepthToSpace", 13, [("input", "input", x)],
        [("output", depth_to_space(x, 2, "DCR"))], attrs={"blocksize": ("int", 2)})
    x = float_data(rng(), (2, 12, 3, 2))
    add("depthtospace_crd", "DepthToSpace", 13, [("input", "input", x)],
        [("output", depth_to_space(x, 2, "CRD"))],
        attrs={"blocksize": ("int", 2), "mode": ("string", "CRD")})
    xi = np.arange(2 * 18 * 2 * 1, dtype=np.int64).reshape(2, 18, 2, 1)
    add("depthtospace_crd_b3_int64", "DepthToSpace", 13, [("input", "input", xi)],
        [("output", depth_to_space(xi, 3, "CRD"))],
        attrs={"blocksize": ("int", 3), "mode": ("string", "CRD")})
    x = float_data(rng(), (2, 3, 4, 6))
    add("spacetodepth", "SpaceToDepth", 13, [("input", "input", x)],
        [("output", space_to_depth(x, 2))], attrs={"blocksize": ("int", 2)})

    def combine(out, key, update, reduction):
        """One scatter update: replaced, added or multiplied in (ScatterND, ScatterElements)."""
        if reduction == "add":
            out[key] = out[key] + update
        elif reduction == "mul":
            out[key] = out[key] * update
        else:
            out[key] = update

    # ScatterND: numpy's indexed assignment, tuples applied in order ----------------------
    def scatter_nd(data, indices, updates, reduction="none"):
        out = data.copy()
        k = indices.shape[-1]
        flat = indices.reshape(-1, k)
        ups = updates.reshape((flat.shape[0],) + data.shape[k:])
        for t, tup in enumerate(flat):
            combine(out, tuple(int(v) for v in tup), ups[t], reduction)
        return out

    x = float_data(rng(), (4, 3))
    ind = np.array([[1], [3]], np.int64)
    upd = float_data(rng(), (2, 3))
    add("scatternd_rows", "ScatterND", 13,
        [("input", "data", x), ("input", "indices", ind), ("input", "updates", upd)],
        [("output", scatter_nd(x, ind, upd))])
    x = float_data(rng(), (2, 3, 4))
    ind = np.array([[[0, 1, 2], [1, -1, 0]], [[0, 0, -1], [1, 2, 3]]], np.int64)
    upd = float_data(rng(), (2, 2))
    add("scatternd_elements_negative", "ScatterND", 13,
        [("input", "data", x), ("const", "indices", ind), ("input", "updates", upd)],
        [("output", scatter_nd(x, ind, upd))])
    x = float_data(rng(), (3, 2))
    ind = np.array([[0], [2], [0]], np.int64)
    upd = float_data(rng(), (3, 2))
    add("scatternd_add_repeated", "ScatterND", 16,
        [("input", "data", x), ("input", "indices", ind), ("input", "updates", upd)],
        [("output", scatter_nd(x, ind, upd, "add"))], attrs={"reduction": ("string", "add")})
    xi = np.arange(1, 13, dtype=np.int64).reshape(2, 6)
    ind = np.array([[1, 4], [0, 0], [1, 4]], np.int64)
    upd = np.array([3, -2, 5], np.int64)
    add("scatternd_mul_int64", "ScatterND", 16,
        [("input", "data", xi), ("input", "indices", ind), ("input", "updates", upd)],
        [("output", scatter_nd(xi, ind, upd, "mul"))], attrs={"reduction": ("string", "mul")})

    # GatherElements / ScatterElements (torch.gather, Tensor.scatter / scatter_add) -------
    def elements_target(idx, pos, axis, axis_dim):
        v = int(idx[pos])
        return pos[:axis] + (v + axis_dim if v < 0 else v,) + pos[axis + 1:]

    def gather_elements(data, idx, axis):
        axis %= data.ndim
        out = np.zeros(idx.shape, data.dtype)
        for pos in np.ndindex(*idx.shape):
            out[pos] = data[elements_target(idx, pos, axis, data.shape[axis])]
        return out

    def scatter_elements(data, idx, updates, axis, reduction="none"):
        axis %= data.ndim
        out = data.copy()
        for pos in np.ndindex(*idx.shape):  # index order, as both kernels apply them
            combine(out, elements_target(idx, pos, axis, data.shape[axis]), updates[pos],
                    reduction)
        return out

    r = rng()
    x = float_data(r, (3, 5))
    ind = r.integers(-5, 5, size=(3, 4)).astype(np.int64)
    add("gatherelements_axis1", "GatherElements", 13,
        [("input", "data", x), ("input", "indices", ind)],
        [("output", gather_elements(x, ind, 1))], attrs={"axis": ("int", 1)})
    x = float_data(r, (4, 3, 2))
    ind = r.integers(-4, 4, size=(6, 2, 2)).astype(np.int32)
    add("gatherelements_axis0_smaller_int32", "GatherElements", 13,
        [("input", "data", x), ("const", "indices", ind)],
        [("output", gather_elements(x, ind, 0))])
    xi = r.integers(-100, 100, size=(2, 3, 4)).astype(np.int64)
    ind = r.integers(0, 4, size=(2, 3, 2)).astype(np.int64)
    add("gatherelements_int64_last_axis", "GatherElements", 13,
        [("input", "data", xi), ("input", "indices", ind)],
        [("output", gather_elements(xi, ind, -1))], attrs={"axis": ("int", -1)})
    x = float_data(r, (3, 5))
    ind = np.array([[4, 0], [-1, 2], [1, 3]], np.int64)  # no repeated target per row
    upd = float_data(r, (3, 2))
    add("scatterelements_axis1", "ScatterElements", 13,
        [("input", "data", x), ("input", "indices", ind), ("input", "updates", upd)],
        [("output", scatter_elements(x, ind, upd, 1))], attrs={"axis": ("int", 1)})
    x = float_data(r, (4, 3))
    ind = np.array([[0, 1, 3], [2, 1, 0], [0, 1, 3], [3, -4, 2], [0, 2, 2]], np.int64)
    upd = float_data(r, (5, 3))
    add("scatterelements_add_repeated", "ScatterElements", 16,
        [("input", "data", x), ("input", "indices", ind), ("input", "updates", upd)],
        [("output", scatter_elements(x, ind, upd, 0, "add"))],
        attrs={"reduction": ("string", "add")})
    xi = np.arange(1, 9, dtype=np.int64).reshape(2, 4)
    ind = np.array([[3, 3, 0], [1, -1, 1]], np.int32)
    upd = np.array([[2, -3, 5], [7, 2, -1]], np.int64)
    add("scatterelements_mul_int64", "ScatterElements", 16,
        [("input", "data", xi), ("input", "indices", ind), ("input", "updates", upd)],
        [("output", scatter_elements(xi, ind, upd, -1, "mul"))],
        attrs={"axis": ("int", -1), "reduction": ("string", "mul")})

    # OneHot (F.one_hot): depth and values are constants read on the host -----------------
    def one_hot(idx, depth, off, on, axis, dtype):
        axis %= idx.ndim + 1
        norm = np.where(idx < 0, idx + depth, idx)
        classes = np.arange(depth).reshape((-1,) + (1,) * (idx.ndim - axis))
        hit = np.expand_dims(norm, axis) == classes
        return np.where(hit, on, off).astype(dtype)

    ind = np.array([[0, 4, -1], [2, 7, -6]], np.int64)  # 7 and -6 are out of range
    add("onehot_int64_last_axis", "OneHot", 13,
        [("input", "indices", ind), ("const", "depth", np.array(5, np.int64)),
         ("const", "values", np.array([0, 1], np.int64))],
        [("output", one_hot(ind, 5, 0, 1, -1, np.int64))])
    ind = np.array([2, 0, -3, 1], np.int32)
    add("onehot_fp32_axis0_float_depth", "OneHot", 13,
        [("input", "indices", ind), ("const", "depth", np.array([3.0], np.float32)),
         ("const", "values", np.array([-1.0, 2.5], np.float32))],
        [("output", one_hot(ind, 3, -1.0, 2.5, 0, np.float32))], attrs={"axis": ("int", 0)})
    ind = np.array([[[1], [0]], [[3], [2]]], np.int64)
    add("onehot_int32_middle_axis", "OneHot", 13,
        [("input", "indices", ind), ("const", "depth", np.array(4, np.int32)),
         ("const", "values", np.array([5, -5], np.int32))],
        [("output", one_hot(ind, 4, 5, -5, 1, np.int32))], attrs={"axis": ("int", 1)})

    # GatherND (torch indexing with index tensors, detection post-processing) -------------
    def gather_nd(data, idx, batch_dims=0):
        b = batch_dims
        k = idx.shape[-1]
        batch_shape = data.shape[:b]
        d = data.reshape((-1,) + data.shape[b:])
        t = idx.reshape((d.shape[0], -1, k))
        out = np.stack([np.stack([d[i][tuple(int(v) for v in tup)] for tup in t[i]])
                        if t.shape[1] else np.zeros((0,) + data.shape[b + k:], data.dtype)
                        for i in range(d.shape[0])])
        return out.reshape(batch_shape + idx.shape[b:-1] + data.shape[b + k:])

    r = rng()
    x = float_data(r, (3, 4, 5))
    ind = np.stack([r.integers(-3, 3, size=6), r.integers(-4, 4, size=6),
                    r.integers(-5, 5, size=6)], axis=-1).reshape(2, 3, 3).astype(np.int64)
    add("gathernd_fp32_elements_negative", "GatherND", 13,
        [("input", "data", x), ("input", "indices", ind)], [("output", gather_nd(x, ind))])
    xi = r.integers(-1000, 1000, size=(4, 3, 2)).astype(np.int64)
    ind = np.array([[[3], [-1]], [[0], [-4]], [[2], [1]]], np.int64)
    add("gathernd_int64_slices", "GatherND", 13,
        [("input", "data", xi), ("input", "indices", ind)], [("output", gather_nd(xi, ind))])
    x = float_data(r, (2, 3, 4))
    ind = np.array([[[2], [0], [-1]], [[1], [-3], [1]]], np.int64)
    add("gathernd_fp32_batch1_slices", "GatherND", 13,
        [("input", "data", x), ("input", "indices", ind)],
        [("output", gather_nd(x, ind, 1))], attrs={"batch_dims": ("int", 1)})
    xi = r.integers(-50, 50, size=(2, 3, 4)).astype(np.int64)
    ind = np.array([[[0, 3], [-1, -4]], [[2, 1], [1, -1]]], np.int64)
    add("gathernd_int64_batch1_elements", "GatherND", 13,
        [("input", "data", xi), ("const", "indices", ind)],
        [("output", gather_nd(xi, ind, 1))], attrs={"batch_dims": ("int", 1)})
    x = float_data(r, (5, 4))
    ind = np.zeros((0, 1), np.int64)  # no detections: no rows picked
    add("gathernd_no_tuples", "GatherND", 13,
        [("input", "data", x), ("input", "indices", ind)], [("output", gather_nd(x, ind))])

    # NonZero (torch.nonzero / numpy.nonzero, stacked: [rank, count]) ----------------------
    def non_zero(a):
        return np.array(np.nonzero(a), np.int64).reshape(a.ndim, -1)

    r = rng()
    x = float_data(r, (4, 5))
    x[r.random((4, 5)) < 0.4] = 0.0
    x[0, 1], x[2, 3], x[3, 0] = -0.0, -0.0, 0.0  # negative zeros are zero
    add("nonzero_fp32", "NonZero", 13, [("input", "x", x)], [("y", non_zero(x))])
    xb = r.random((3, 7)) < 0.3
    add("nonzero_bool", "NonZero", 13, [("input", "x", xb)], [("y", non_zero(xb))])
    xi = r.integers(-2, 3, size=(2, 3, 4)).astype(np.int32)
    add("nonzero_int32_3d", "NonZero", 13, [("input", "x", xi)], [("y", non_zero(xi))])
    x = np.zeros((3, 4), np.float32)
    x[1, 2] = -0.0
    add("nonzero_all_zero", "NonZero", 13, [("input", "x", x)], [("y", non_zero(x))])
    # Concat of rows of one or two elements along the last axis (torch.stack(..., -1) of
    # index grids, as MViT's relative positions write it): the kernel's narrow path.
    r = rng()
    g = [r.integers(-50, 50, size=(3, 4, 1)).astype(np.int64) for _ in range(3)]
    add("concat_last_axis_narrow_int64", "Concat", 13,
        [("input", "a", g[0]), ("input", "b", g[1]), ("input", "c", g[2])],
        [("concat_result", np.concatenate(g, axis=-1))], attrs={"axis": ("int", -1)})
    p, q = float_data(r, (5, 2)), float_data(r, (5, 1))
    add("concat_last_axis_narrow_fp32", "Concat", 13, [("input", "p", p), ("input", "q", q)],
        [("concat_result", np.concatenate([p, q], axis=1))], attrs={"axis": ("int", 1)})
