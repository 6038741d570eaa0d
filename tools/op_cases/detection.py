"""Per-op fixture cases of the detection heads: NonMaxSuppression and RoiAlign (see
OP_CASE_FAMILIES in tools/gen_models.py).

The references follow ONNX Runtime's semantics (kernels/attrs/detection.h), which for the
shapes torchvision exports are torchvision.ops.nms and torchvision.ops.roi_align.
"""
import math

import numpy as np

from gen_models import EXACT  # noqa: F401

ROI_TOL = (1e-5, 1e-5)
I64_MAX = np.iinfo(np.int64).max
f32 = np.float32


# NonMaxSuppression ----------------------------------------------------------------------

def nms_box(b, center):
    """(lo0, lo1, hi0, hi1) in float32, as kernels/detection_coord.h decodes a box."""
    b = [f32(v) for v in b]
    if center:
        hw, hh = b[2] / f32(2), b[3] / f32(2)
        return (b[1] - hh, b[0] - hw, b[1] + hh, b[0] + hw)
    return (min(b[0], b[2]), min(b[1], b[3]), max(b[0], b[2]), max(b[1], b[3]))


def nms_suppresses(a, b, thr):
    """IoU(a, b) > thr in float32, areas and union formed as torchvision's nms forms them."""
    i0 = min(a[2], b[2]) - max(a[0], b[0])
    i1 = min(a[3], b[3]) - max(a[1], b[1])
    if not (i0 > 0 and i1 > 0):
        return False
    inter = f32(i0 * i1)
    area_a = f32((a[2] - a[0]) * (a[3] - a[1]))
    area_b = f32((b[2] - b[0]) * (b[3] - b[1]))
    union = f32(f32(area_a + area_b) - inter)
    if not (inter > 0 and area_a > 0 and area_b > 0 and union > 0):
        return False
    return bool(f32(inter / union) > f32(thr))


def nms_ref(boxes, scores, max_per_class, iou, score_threshold=None, center=False):
    """[selected, 3] INT64 rows (batch, class, box)."""
    rows = []
    for b in range(boxes.shape[0]):
        decoded = [nms_box(bx, center) for bx in boxes[b]]
        for c in range(scores.shape[1]):
            s = scores[b, c]
            cand = [i for i in range(len(s)) if score_threshold is None or s[i] > f32(score_threshold)]
            cand.sort(key=lambda i: (-float(s[i]), i))
            kept = []
            for i in cand:
                if len(kept) >= max_per_class:
                    break
                if any(nms_suppresses(decoded[k], decoded[i], iou) for k in kept):
                    continue
                kept.append(i)
                rows.append((b, c, i))
    return np.array(rows, np.int64).reshape(-1, 3)


def corner_boxes(r, n, extent=10.0, size=(1.0, 4.0)):
    """n boxes [y1, x1, y2, x2] with y1 < y2, x1 < x2, crowded enough to overlap."""
    lo = r.uniform(0.0, extent, size=(n, 2))
    wh = r.uniform(size[0], size[1], size=(n, 2))
    return np.concatenate([lo, lo + wh], axis=1).astype(np.float32)


def nms_inputs(boxes, scores, max_per_class=None, iou=None, score_threshold=None):
    inputs = [("input", "boxes", boxes), ("input", "scores", scores)]
    if max_per_class is not None:
        inputs.append(("const", "max_output_boxes_per_class", np.array([max_per_class], np.int64)))
    if iou is not None:
        inputs.append(("const", "iou_threshold", np.array([iou], np.float32)))
    if score_threshold is not None:
        inputs.append(("const", "score_threshold", np.array([score_threshold], np.float32)))
    return inputs


# RoiAlign --------------------------------------------------------------------------------

def roi_geometry(roi, scale, half_pixel, out_h, out_w, sampling_ratio):
    """(start_h, start_w, bin_h, bin_w, grid_h, grid_w) in float64."""
    off = 0.5 if half_pixel else 0.0
    x1, y1, x2, y2 = (float(v) * scale - off for v in roi)
    rw, rh = x2 - x1, y2 - y1
    if not half_pixel:
        rw, rh = max(rw, 1.0), max(rh, 1.0)
    bh, bw = rh / out_h, rw / out_w
    gh = sampling_ratio if sampling_ratio > 0 else max(int(math.ceil(bh)), 0)
    gw = sampling_ratio if sampling_ratio > 0 else max(int(math.ceil(bw)), 0)
    return y1, x1, bh, bw, gh, gw


def bilinear_taps(y, x, h, w):
    """[(weight, row, col)] of one sample (empty outside [-1, h] x [-1, w])."""
    if y < -1.0 or y > h or x < -1.0 or x > w:
        return []
    y, x = max(y, 0.0), max(x, 0.0)
    y0, x0 = int(y), int(x)
    if y0 >= h - 1:
        y0 = y1 = h - 1
        y = float(y0)
    else:
        y1 = y0 + 1
    if x0 >= w - 1:
        x0 = x1 = w - 1
        x = float(x0)
    else:
        x1 = x0 + 1
    ly, lx = y - y0, x - x0
    hy, hx = 1.0 - ly, 1.0 - lx
    return [(hy * hx, y0, x0), (hy * lx, y0, x1), (ly * hx, y1, x0), (ly * lx, y1, x1)]


def roi_align_ref(x, rois, batch, out_h, out_w, scale=1.0, sampling_ratio=0, half_pixel=True,
                  max_mode=False):
    """[R, C, out_h, out_w] in float64, then float32. max: ONNX Runtime's definition, the
    largest weighted tap of any sample (a sample outside the image counts 0)."""
    x = x.astype(np.float64)
    n, c, h, w = x.shape
    y = np.zeros((len(rois), c, out_h, out_w), np.float64)
    for r, roi in enumerate(rois):
        sh, sw, bh, bw, gh, gw = roi_geometry(roi, scale, half_pixel, out_h, out_w, sampling_ratio)
        plane = x[batch[r]]
        count = max(gh * gw, 1)
        for ph in range(out_h):
            for pw in range(out_w):
                vals = []
                for iy in range(gh):
                    yy = sh + ph * bh + (iy + 0.5) * bh / gh
                    for ix in range(gw):
                        xx = sw + pw * bw + (ix + 0.5) * bw / gw
                        taps = bilinear_taps(yy, xx, h, w)
                        if not taps:
                            vals.append(np.zeros(c))
                        elif max_mode:
                            vals.append(np.max([wt * plane[:, i, j] for wt, i, j in taps], axis=0))
                        else:
                            vals.append(sum(wt * plane[:, i, j] for wt, i, j in taps))
                if not vals:
                    continue
                y[r, :, ph, pw] = np.max(vals, axis=0) if max_mode else np.sum(vals, axis=0) / count
    return y.astype(np.float32)


def check_grids(rois, scale, half_pixel, out_h, out_w):
    """The kernel counts samples from float32 bin sizes; a bin size within rounding of an
    integer could count differently from this float64 reference."""
    for roi in rois:
        *_, bh, bw, _, _ = roi_geometry(roi, scale, half_pixel, out_h, out_w, 0)
        for v in (bh, bw):
            assert abs(v - round(v)) > 1e-4 or v == round(v), (roi, v)


def cases(add, _shared_rng):
    """Adds this family's OpCases: add(name, op, opset, inputs, outputs, attrs=, tol=).

    Draws from its own seeded generators instead of the shared counter, so adding a case
    here does not shift the random data of the families generated after this one.
    """
    seed = [9000]

    def rng():
        seed[0] += 1
        return np.random.default_rng(seed[0])

    # NonMaxSuppression -------------------------------------------------------------------
    r = rng()
    boxes = np.stack([corner_boxes(r, 12), corner_boxes(r, 12)])
    scores = r.uniform(0.0, 1.0, size=(2, 2, 12)).astype(np.float32)
    add("nms_corners_batches_classes", "NonMaxSuppression", 13,
        nms_inputs(boxes, scores, 3, 0.3, 0.25),
        [("selected_indices", nms_ref(boxes, scores, 3, 0.3, 0.25))])

    r = rng()
    centers = r.uniform(0.0, 8.0, size=(1, 10, 2))
    sizes = r.uniform(1.0, 4.0, size=(1, 10, 2))
    boxes = np.concatenate([centers, sizes], axis=2).astype(np.float32)
    scores = r.uniform(0.0, 1.0, size=(1, 1, 10)).astype(np.float32)
    add("nms_center_point_box", "NonMaxSuppression", 13, nms_inputs(boxes, scores, 10, 0.2),
        [("selected_indices", nms_ref(boxes, scores, 10, 0.2, center=True))],
        attrs={"center_point_box": ("int", 1)})

    r = rng()
    boxes = corner_boxes(r, 10)[None]
    flip = r.random(size=(1, 10)) < 0.5
    boxes[flip] = boxes[flip][:, [2, 3, 0, 1]]  # the other diagonal's corners first
    # Scores in tenths, so some tie: the lower box index goes first.
    scores = (np.round(r.uniform(0.0, 1.0, size=(1, 2, 10)) * 10) / 10).astype(np.float32)
    add("nms_flipped_corners_ties", "NonMaxSuppression", 13, nms_inputs(boxes, scores, 10, 0.1),
        [("selected_indices", nms_ref(boxes, scores, 10, 0.1))])

    # torchvision's export: B = C = 1, no limit, no score threshold; boxes x1, y1, x2, y2.
    r = rng()
    boxes = corner_boxes(r, 200, extent=40.0, size=(4.0, 16.0))[None]
    scores = r.uniform(0.0, 1.0, size=(1, 1, 200)).astype(np.float32)
    add("nms_torchvision_like", "NonMaxSuppression", 13, nms_inputs(boxes, scores, I64_MAX, 0.5),
        [("selected_indices", nms_ref(boxes, scores, I64_MAX, 0.5))])

    r = rng()
    boxes = corner_boxes(r, 6)[None]
    scores = r.uniform(0.0, 0.5, size=(1, 3, 6)).astype(np.float32)
    add("nms_all_below_threshold", "NonMaxSuppression", 13,
        nms_inputs(boxes, scores, 4, 0.5, 0.9),
        [("selected_indices", nms_ref(boxes, scores, 4, 0.5, 0.9))])

    # RoiAlign ----------------------------------------------------------------------------
    r = rng()
    x = r.uniform(-2.0, 2.0, size=(2, 3, 10, 12)).astype(np.float32)
    # Image-scale boxes (x1, y1, x2, y2) on a 48 x 40 image at spatial_scale 0.25: inside,
    # partly left of / above the image, partly past its far edges, tiny, and one reaching
    # far outside, and one with its corners swapped (empty under half_pixel, 1 x 1 without).
    rois = np.array([[4.3, 6.1, 30.7, 22.9],
                     [-9.4, -5.2, 14.6, 12.3],
                     [30.2, 25.5, 55.9, 47.3],
                     [20.1, 10.6, 21.3, 11.2],
                     [-30.7, 18.4, 70.2, 90.6],
                     [1.7, 2.9, 45.1, 37.7],
                     [38.6, 30.1, 27.4, 19.8]], np.float32)
    batch = np.array([0, 1, 1, 0, 1, 0, 1], np.int64)
    inputs = [("input", "X", x), ("input", "rois", rois), ("input", "batch_indices", batch)]
    scale = 0.25
    for name, opset, ctm, mode, sr, (oh, ow) in [
        ("roialign_avg_half_pixel_sr0", 16, "half_pixel", "avg", 0, (3, 4)),
        ("roialign_avg_half_pixel_sr2", 16, "half_pixel", "avg", 2, (2, 2)),
        ("roialign_avg_output_half_pixel_sr0", 16, "output_half_pixel", "avg", 0, (3, 2)),
        ("roialign_avg_opset13_sr2", 13, None, "avg", 2, (7, 7)),
        ("roialign_max_half_pixel_sr2", 16, "half_pixel", "max", 2, (3, 3)),
        ("roialign_max_output_half_pixel_sr0", 16, "output_half_pixel", "max", 0, (2, 3)),
    ]:
        half_pixel = ctm == "half_pixel"
        if sr == 0:
            check_grids(rois, scale, half_pixel, oh, ow)
        attrs = {"output_height": ("int", oh), "output_width": ("int", ow),
                 "sampling_ratio": ("int", sr), "spatial_scale": ("float", scale),
                 "mode": ("string", mode)}
        if ctm is not None:
            attrs["coordinate_transformation_mode"] = ("string", ctm)
        y = roi_align_ref(x, rois, batch, oh, ow, scale, sr, half_pixel, mode == "max")
        add(name, "RoiAlign", opset, inputs, [("Y", y)], attrs=attrs, tol=ROI_TOL)
