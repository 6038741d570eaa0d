"""Per-op fixture cases of the rnn family (see OP_CASE_FAMILIES in tools/gen_models.py)."""
import numpy as np

from gen_models import OpCase, float_data, EXACT, ELEMENTWISE_MATH, GEMM_TOL, NORM_TOL, REDUCE_TOL  # noqa: F401

# A few steps of float32 recurrence against a float64 reference.
RNN_TOL = (2e-5, 1e-4)

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def recurrent_ref(op, x, w, r, b=None, lens=None, h0=None, c0=None, p=None, direction="forward",
                  layout=0, clip=None, linear_before_reset=0):
    """The ONNX LSTM / GRU / RNN equations (default activations) in float64.

    Returns Y, Y_h (and Y_c for LSTM) in the layout's shapes, as float32."""
    x = x.astype(np.float64)
    if layout == 1:
        x = x.transpose(1, 0, 2)
        h0 = None if h0 is None else h0.transpose(1, 0, 2)
        c0 = None if c0 is None else c0.transpose(1, 0, 2)
    seq, batch, _ = x.shape
    dirs, gh, _ = w.shape
    hs = gh // GATES[op]
    lens = np.full(batch, seq) if lens is None else lens
    y = np.zeros((seq, dirs, batch, hs))
    y_h = np.zeros((dirs, batch, hs))
    y_c = np.zeros((dirs, batch, hs))

    def clipped(v):
        return v if clip is None else np.clip(v, -clip, clip)

    for d in range(dirs):
        reverse = direction == "reverse" or d == 1
        wd, rd = w[d].astype(np.float64), r[d].astype(np.float64)
        bd = np.zeros(2 * gh) if b is None else b[d].astype(np.float64)
        wb, rb = bd[:gh], bd[gh:]
        pd = np.zeros(3 * hs) if p is None else p[d].astype(np.float64)
        for n in range(batch):
            h = np.zeros(hs) if h0 is None else h0[d, n].astype(np.float64)
            c = np.zeros(hs) if c0 is None else c0[d, n].astype(np.float64)
            steps = range(lens[n] - 1, -1, -1) if reverse else range(lens[n])
            for t in steps:
                xt = x[t, n]
                if op == "LSTM":
                    g = xt @ wd.T + h @ rd.T + wb + rb
                    gi, go, gf, gc = np.split(g, 4)
                    i = _sigmoid(clipped(gi + pd[:hs] * c))
                    f = _sigmoid(clipped(gf + pd[2 * hs:] * c))
                    c = f * c + i * np.tanh(clipped(gc))
                    o = _sigmoid(clipped(go + pd[hs:2 * hs] * c))
                    h = o * np.tanh(c)
                elif op == "GRU":
                    wz, wr, wh = np.split(wd, 3)
                    rz, rr, rh = np.split(rd, 3)
                    wbz, wbr, wbh = np.split(wb, 3)
                    rbz, rbr, rbh = np.split(rb, 3)
                    z = _sigmoid(clipped(xt @ wz.T + h @ rz.T + wbz + rbz))
                    rg = _sigmoid(clipped(xt @ wr.T + h @ rr.T + wbr + rbr))
                    if linear_before_reset:
                        cand = np.tanh(clipped(xt @ wh.T + rg * (h @ rh.T + rbh) + wbh))
                    else:
                        cand = np.tanh(clipped(xt @ wh.T + (rg * h) @ rh.T + rbh + wbh))
                    h = (1 - z) * cand + z * h
                else:
                    h = np.tanh(clipped(xt @ wd.T + h @ rd.T + wb + rb))
                y[t, d, n] = h
            y_h[d, n] = h
            y_c[d, n] = c
    if layout == 1:
        y = y.transpose(2, 0, 1, 3)
        y_h = y_h.transpose(1, 0, 2)
        y_c = y_c.transpose(1, 0, 2)
    outs = [y.astype(np.float32), y_h.astype(np.float32)]
    if op == "LSTM":
        outs.append(y_c.astype(np.float32))
    return outs


def _recurrent_case(add, rng, name, op, seq, batch, inp, hs, direction="forward", layout=0,
                    bias=True, lens=None, states=False, peep=False, clip=None, lbr=None,
                    opset=14, outputs=None, activations=None):
    dirs = 2 if direction == "bidirectional" else 1
    gh = GATES[op] * hs
    x_shape = (seq, batch, inp) if layout == 0 else (batch, seq, inp)
    state_shape = (dirs, batch, hs) if layout == 0 else (batch, dirs, hs)
    x = float_data(rng, x_shape, -1.0, 1.0)
    w = float_data(rng, (dirs, gh, inp), -0.5, 0.5)
    r = float_data(rng, (dirs, gh, hs), -0.5, 0.5)
    inputs = [("input", "X", x), ("const", "W", w), ("const", "R", r)]
    b = h0 = c0 = p = None
    if bias or lens is not None or states or peep:
        b = float_data(rng, (dirs, 2 * gh), -0.5, 0.5)
        inputs.append(("const", "B", b))
    if lens is not None or states or peep:
        lens_arr = np.array(lens if lens is not None else [seq] * batch, np.int32)
        inputs.append(("input", "sequence_lens", lens_arr))
    if states or peep:
        h0 = float_data(rng, state_shape, -1.0, 1.0)
        inputs.append(("input", "initial_h", h0))
        if op == "LSTM":
            c0 = float_data(rng, state_shape, -1.0, 1.0)
            inputs.append(("input", "initial_c", c0))
    if peep:
        p = float_data(rng, (dirs, 3 * hs), -0.5, 0.5)
        inputs.append(("const", "P", p))
    attrs = {"hidden_size": ("int", hs)}
    if direction != "forward":
        attrs["direction"] = ("string", direction)
    if layout:
        attrs["layout"] = ("int", layout)
    if clip is not None:
        attrs["clip"] = ("float", clip)
    if lbr is not None:
        attrs["linear_before_reset"] = ("int", lbr)
    if activations is not None:
        attrs["activations"] = ("strings", activations)
    outs = recurrent_ref(op, x, w, r, b, None if lens is None else np.array(lens), h0, c0, p,
                         direction, layout, clip, lbr or 0)
    names = ["Y", "Y_h", "Y_c"]
    n_out = len(outs) if outputs is None else outputs
    add(name, op, opset, inputs, [(names[i], outs[i]) for i in range(n_out)], attrs=attrs,
        tol=RNN_TOL)


def cases(add, rng):
    """Adds this family's OpCases: add(name, op, opset, inputs, outputs, attrs=, tol=)."""
    # LSTM ------------------------------------------------------------------------------
    _recurrent_case(add, rng(), "lstm_forward", "LSTM", 5, 3, 4, 6)
    _recurrent_case(add, rng(), "lstm_no_bias_y_only", "LSTM", 3, 2, 3, 4, bias=False,
                    outputs=1)
    _recurrent_case(add, rng(), "lstm_reverse_states", "LSTM", 4, 2, 3, 5, direction="reverse",
                    states=True)
    _recurrent_case(add, rng(), "lstm_bidirectional_batch_first", "LSTM", 4, 3, 5, 4,
                    direction="bidirectional", layout=1, states=True)
    _recurrent_case(add, rng(), "lstm_seq_lens_bidirectional", "LSTM", 5, 3, 3, 4,
                    direction="bidirectional", lens=[5, 2, 0], states=True)
    _recurrent_case(add, rng(), "lstm_peepholes_clip", "LSTM", 4, 2, 3, 3, peep=True, clip=0.7)
    _recurrent_case(add, rng(), "lstm_opset13", "LSTM", 2, 2, 2, 3, opset=13)
    _recurrent_case(add, rng(), "lstm_empty_batch", "LSTM", 3, 0, 2, 3)
    _recurrent_case(add, rng(), "lstm_empty_sequence", "LSTM", 0, 2, 2, 3, states=True)
    # GRU -------------------------------------------------------------------------------
    _recurrent_case(add, rng(), "gru_forward", "GRU", 5, 3, 4, 6)
    _recurrent_case(add, rng(), "gru_linear_before_reset", "GRU", 5, 3, 4, 6, lbr=1)
    _recurrent_case(add, rng(), "gru_bidirectional_batch_first_lbr", "GRU", 4, 2, 3, 5,
                    direction="bidirectional", layout=1, states=True, lbr=1)
    _recurrent_case(add, rng(), "gru_reverse_seq_lens_clip", "GRU", 4, 3, 3, 4,
                    direction="reverse", lens=[1, 4, 3], states=True, clip=0.5)
    _recurrent_case(add, rng(), "gru_seq_lens_lbr", "GRU", 4, 3, 3, 4, lens=[2, 4, 0], lbr=1)
    # RNN -------------------------------------------------------------------------------
    _recurrent_case(add, rng(), "rnn_forward", "RNN", 5, 3, 4, 6)
    _recurrent_case(add, rng(), "rnn_bidirectional_batch_first_states", "RNN", 3, 2, 3, 4,
                    direction="bidirectional", layout=1, states=True)
    # PyTorch names RNN's activation ("strings": an ONNX STRINGS attribute).
    _recurrent_case(add, rng(), "rnn_named_activation_opset17", "RNN", 3, 2, 3, 4, opset=17,
                    activations=["Tanh"])
    _recurrent_case(add, rng(), "rnn_reverse_seq_lens_clip", "RNN", 4, 3, 2, 3,
                    direction="reverse", lens=[4, 1, 2], clip=0.3, bias=False)
    einsum_cases(add, rng)


def einsum_cases(add, rng):
    """Einsum: the forms transformers export, transposes, and forms that need copies."""
    for name, eq, shapes in [
        ("einsum_batched_matmul", "bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
        ("einsum_attention_scores", "bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
        ("einsum_attention_context", "bhqk,bhkd->bhqd", [(2, 3, 4, 6), (2, 3, 6, 5)]),
        ("einsum_matmul", "ij,jk->ik", [(3, 4), (4, 5)]),
        ("einsum_batch_dot", "bi,bi->b", [(4, 6), (4, 6)]),
        ("einsum_transpose", "ij->ji", [(3, 4)]),
        ("einsum_transpose_3d", "abc->cab", [(2, 3, 4)]),
        ("einsum_implicit_output", "ij,jk", [(3, 4), (4, 5)]),
        ("einsum_operand_copies_output_perm", "jbi,bkj->kbi", [(4, 2, 3), (2, 5, 4)]),
        ("einsum_outer", "i,j->ij", [(3,), (4,)]),
        ("einsum_full_contraction", "ij,ij->", [(3, 4), (3, 4)]),
        ("einsum_uppercase", "bIJ,bJK->bIK", [(2, 3, 4), (2, 4, 2)]),
        ("einsum_empty_batch", "bij,bjk->bik", [(0, 3, 4), (0, 4, 5)]),
    ]:
        r = rng()
        ops = [float_data(r, s) for s in shapes]
        want = np.einsum(eq.replace(" ", ""),
                         *[o.astype(np.float64) for o in ops]).astype(np.float32)
        add(name, "Einsum", 13, [("input", f"in{i}", o) for i, o in enumerate(ops)],
            [("Output", np.asarray(want, np.float32))], attrs={"equation": ("string", eq)},
            tol=GEMM_TOL)
