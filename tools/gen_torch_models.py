#!/usr/bin/python3
"""Exports real PyTorch models to ONNX, as a user of ndserve would, with PyTorch references.

Run with Debian's python (python3-torch 1.13, python3-torchvision 0.14, python3-onnx):

    /usr/bin/python3 tools/gen_torch_models.py --out DIR [--only NAME[,NAME...]]
    /usr/bin/python3 tools/gen_torch_models.py --print-dir   # the cache folder the build uses

The build runs it once per version of this file (CMake target torch_fixtures): the output
is too big for git, and both build trees (build/, build-asan/) share one copy under
.fixture-cache/torch/<first 16 hex digits of this file's SHA-256>/. A DONE file marks a
finished folder; a later run finds it and only touches it. Concurrent runs serialize on a
lock file, and a folder appears only once complete (written aside, then renamed).

Every model gets random weights from a fixed seed (torchvision with weights=None, nothing
downloaded) and is exported by torch.onnx.export at opset 17 with no config.pbtxt, batch
dynamic everywhere and sequence length dynamic for the text models. BatchNorm layers see a
few random batches in train mode first, so their running statistics fit the data and the
outputs are not vanishingly small.

Some models also get an FP16 twin, <model>_fp16: the same export with every float tensor in
FP16 (initializers, float inputs and outputs, Cast targets, Constant and ConstantOfShape
values, clamped to FP16's range), which is what `model.half()` exports. PyTorch 1.13 cannot
trace a half model on the CPU (no half conv or matmul there), so the twin is converted from
the FP32 export instead. Its references are PyTorch's FP32 run with every parameter and
buffer rounded to FP16 and the float inputs in FP16, the outputs rounded to FP16, and its
tolerances are FP16's (FP16_ATOL_FRACTION, FP16_RTOL): the export's own constant folding
(Conv + BatchNorm) rounds the folded weights, not PyTorch's, to FP16.

Writes, under DIR (a model repository the daemon can serve as it is):

  <model>/1/model.onnx               the export; no config.pbtxt
  <model>/ops.txt                    '<OpType> <count>' per operator type of the export
                                     (nodes of Loop bodies and If branches included)
  <model>/cases/<set>/case.txt       one input set and PyTorch's outputs for it
  <model>/cases/<set>/{in,out}_*.bin
  DONE                               versions of torch, torchvision and onnx; seconds taken

case.txt uses the manifest grammar of tools/gen_models.py (model/input/output/tolerance
lines), plus one line per output that readers of the plain grammar skip:

  output_tolerance <name> <atol> <rtol>   this output passes if |got-ref| <= atol + rtol*|ref|

Each output's atol is 1e-4 * max|reference| of that output and rtol is 1e-3; the case's
'tolerance' line carries the loosest of them. Every model has at least two input sets that
differ in batch (CNNs) or in batch and sequence length (text models), so dynamic shapes
really vary; scripts/models-bench.sh times some of these sets (resnet18 b8, bert_encoder
b8_s32, ...) so that ndserve and ONNX Runtime read the same bytes.
"""

import argparse
import contextlib
import copy
import fcntl
import hashlib
import io
import math
import os
import shutil
import sys
import time
from typing import List

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

OPSET = 17
SEED = 20261123
RTOL = 1e-3
ATOL_FRACTION = 1e-4
MIN_MAX_ABS = 1e-3  # a reference this small says the model is numerically dead
FP16_RTOL = 4e-3
FP16_ATOL_FRACTION = 4e-3
FP16_MAX = 65504.0

HEADER = """\
# ndserve fixture manifest v1 (tools/gen_models.py), written by tools/gen_torch_models.py.
#   model <path>                       ONNX file, relative to this file
#   input <name> <DTYPE> <dims> <file> graph input, fed at run time
#   output <name> <DTYPE> <dims> <file> reference output (PyTorch, float32 or float16)
#   output_tolerance <name> <atol> <rtol>  per output: |got-ref| <= atol + rtol*|ref|
#   tolerance <atol> <rtol>            the loosest output_tolerance, for plain readers
"""

DTYPE_NAME = {
    np.dtype(np.float32): "FP32",
    np.dtype(np.float16): "FP16",
    np.dtype(np.int64): "INT64",
    np.dtype(np.bool_): "BOOL",
}


def source_hash():
    with open(os.path.abspath(__file__), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def default_cache_dir():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.path.join(root, ".fixture-cache", "torch", source_hash())


# ---------------------------------------------------------------------------------------
# The text and sequence models, in plain torch


def gelu_erf(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


class SelfAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.head_dim = hidden // heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)

    def forward(self, x, additive_mask):
        b, s, h = x.shape
        q, k, v = self.qkv(x).split(h, dim=-1)

        def heads(t):
            return t.reshape(b, s, self.heads, self.head_dim).transpose(1, 2)

        q, k, v = heads(q), heads(k), heads(v)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        scores = scores + additive_mask
        probs = torch.softmax(scores, dim=-1)
        ctx = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, h)
        return self.proj(ctx)


class EncoderLayer(nn.Module):
    def __init__(self, hidden, heads, ffn):
        super().__init__()
        self.attn = SelfAttention(hidden, heads)
        self.ln1 = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, ffn)
        self.fc2 = nn.Linear(ffn, hidden)
        self.ln2 = nn.LayerNorm(hidden)

    def forward(self, x, additive_mask):
        x = self.ln1(x + self.attn(x, additive_mask))
        return self.ln2(x + self.fc2(gelu_erf(self.fc1(x))))


class BertEncoder(nn.Module):
    """BERT-style: token + position embeddings, post-LN layers, pooled first token."""

    def __init__(self, vocab=1000, hidden=96, heads=4, ffn=256, layers=2, max_pos=256):
        super().__init__()
        self.tok = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(max_pos, hidden)
        self.ln = nn.LayerNorm(hidden)
        self.layers = nn.ModuleList(EncoderLayer(hidden, heads, ffn) for _ in range(layers))
        self.pool = nn.Linear(hidden, hidden)

    def forward(self, input_ids, attention_mask):
        positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        x = self.ln(self.tok(input_ids) + self.pos(positions))
        # 1 keeps a token, 0 hides it from every query: -10000 before the softmax.
        additive = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
        for layer in self.layers:
            x = layer(x, additive)
        pooled = torch.tanh(self.pool(x[:, 0]))
        return x, pooled


class DecoderLayer(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(hidden)
        self.attn = SelfAttention(hidden, heads)
        self.ln2 = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, 4 * hidden)
        self.fc2 = nn.Linear(4 * hidden, hidden)

    def forward(self, x, additive_mask):
        x = x + self.attn(self.ln1(x), additive_mask)
        return x + self.fc2(gelu_erf(self.fc1(self.ln2(x))))


class GptDecoder(nn.Module):
    """GPT-2-style: pre-LN layers, causal mask from torch.triu, LM head tied to the embedding."""

    def __init__(self, vocab=1000, hidden=64, heads=4, layers=2, max_pos=256):
        super().__init__()
        self.tok = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(max_pos, hidden)
        self.layers = nn.ModuleList(DecoderLayer(hidden, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden)

    def forward(self, input_ids):
        s = input_ids.shape[1]
        positions = torch.arange(s, device=input_ids.device).unsqueeze(0)
        x = self.tok(input_ids) + self.pos(positions)
        ones = torch.ones(s, s, dtype=torch.bool, device=input_ids.device)
        future = torch.triu(ones, diagonal=1)
        zeros = torch.zeros(s, s, dtype=x.dtype, device=x.device)
        causal = torch.where(future, torch.full_like(zeros, torch.finfo(x.dtype).min), zeros)
        for layer in self.layers:
            x = layer(x, causal)
        return torch.matmul(self.ln_f(x), self.tok.weight.t())


class LstmClassifier(nn.Module):
    def __init__(self, vocab=500, emb=32, hidden=64, classes=5):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb)
        self.lstm = nn.LSTM(emb, hidden, num_layers=1, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, input_ids):
        _, (h, _) = self.lstm(self.emb(input_ids))
        return self.head(h[-1])


class GruTagger(nn.Module):
    """Per-step tags from a 2-layer bidirectional GRU over float features."""

    def __init__(self, features=16, hidden=32, tags=7):
        super().__init__()
        self.gru = nn.GRU(features, hidden, num_layers=2, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * hidden, tags)

    def forward(self, features):
        out, _ = self.gru(features)
        return self.head(out)


class ConvAutoencoder(nn.Module):
    """Encoder-decoder: strided convs down, ConvTranspose2d and Upsample (Resize) back up."""

    def __init__(self):
        super().__init__()
        self.down = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU())
        self.up1 = nn.Sequential(
            nn.ConvTranspose2d(32, 16, 4, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.up2 = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.out = nn.Conv2d(16, 2, 3, padding=1)

    def forward(self, image):
        x = self.up1(self.down(image))
        x = self.up2(x)
        mask = torch.sigmoid(self.out(x))
        up_nearest = F.interpolate(image, scale_factor=0.5, mode="nearest")
        return mask, up_nearest


class GroupNormUNet(nn.Module):
    """A diffusion-style UNet block: GroupNorm + SiLU, a strided conv down, PixelShuffle back
    up, a skip concatenation and an InstanceNorm2d head (InstanceNormalization, DepthToSpace
    CRD in the export)."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.norm1 = nn.GroupNorm(4, 16)
        self.down = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.norm2 = nn.GroupNorm(8, 32, eps=1e-6)
        self.up = nn.Sequential(nn.Conv2d(32, 64, 3, padding=1), nn.PixelShuffle(2))
        self.head_norm = nn.InstanceNorm2d(32, affine=True)
        self.head = nn.Conv2d(32, 3, 1)

    def forward(self, image):
        skip = F.silu(self.norm1(self.stem(image)))
        x = F.silu(self.norm2(self.down(skip)))
        x = torch.cat([self.up(x), skip], dim=1)
        return self.head(F.silu(self.head_norm(x)))


class TinyVideoResNet(nn.Module):
    """torchvision's video ResNet blocks (r3d_18's Conv3DSimple, r2plus1d_18's Conv2Plus1D)
    at a quarter of their width, on 8-frame 32 x 32 clips: 3-D Conv, BatchNorm over 5-D
    tensors, a 3-D MaxPool and a GlobalAveragePool over a volume in the export."""

    def __init__(self, classes=10):
        from torchvision.models.video.resnet import BasicBlock, Conv2Plus1D, Conv3DSimple
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv3d(3, 16, (3, 7, 7), stride=(1, 2, 2), padding=(1, 3, 3), bias=False),
            nn.BatchNorm3d(16), nn.ReLU(inplace=True))
        self.pool = nn.MaxPool3d((1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1))
        self.layer1 = BasicBlock(16, 16, Conv3DSimple)
        down = nn.Sequential(nn.Conv3d(16, 32, 1, stride=2, bias=False), nn.BatchNorm3d(32))
        self.layer2 = BasicBlock(16, 32, Conv2Plus1D, stride=2, downsample=down)
        self.head = nn.Sequential(nn.AdaptiveAvgPool3d(1), nn.Flatten(), nn.Linear(32, classes))

    def forward(self, clips):
        return self.head(self.layer2(self.layer1(self.pool(self.stem(clips)))))


class TinyUNet3d(nn.Module):
    """A volumetric segmentation UNet (the 3D U-Net / nnU-Net shape): Conv3d +
    InstanceNorm3d + LeakyReLU blocks, a MaxPool3d down, a ConvTranspose3d up beside a
    trilinear Upsample (Resize over a volume), a skip concatenation and an AvgPool3d
    smoothing of the logits. Depth, height and width are dynamic."""

    @staticmethod
    def block(cin, cout):
        return nn.Sequential(nn.Conv3d(cin, cout, 3, padding=1),
                             nn.InstanceNorm3d(cout, affine=True), nn.LeakyReLU(0.01))

    def __init__(self):
        super().__init__()
        self.enc = self.block(1, 8)
        self.down = nn.MaxPool3d(2)
        self.mid = self.block(8, 16)
        self.up = nn.ConvTranspose3d(16, 8, 2, stride=2)
        self.up_smooth = nn.Sequential(
            nn.Upsample(scale_factor=2, mode="trilinear", align_corners=False), nn.Conv3d(16, 8, 1))
        self.dec = self.block(16, 8)
        self.head = nn.Conv3d(8, 3, 1)
        self.smooth = nn.AvgPool3d(3, stride=1, padding=1)

    def forward(self, volume):
        skip = self.enc(volume)
        x = self.mid(self.down(skip))
        x = self.dec(torch.cat([self.up(x) + self.up_smooth(x), skip], dim=1))
        return self.smooth(self.head(x))


class TinyVdsr(nn.Module):
    """Super-resolution the VDSR way: the image upscaled x2 by bicubic interpolation
    (Resize mode cubic), then a residual of a few 3x3 convolutions added to it. Height and
    width are dynamic."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(inplace=True),
                                  nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(inplace=True),
                                  nn.Conv2d(16, 3, 3, padding=1))

    def forward(self, image):
        up = F.interpolate(image, scale_factor=2, mode="bicubic", align_corners=False)
        return up + self.body(up)


class SpatialTransformer(nn.Module):
    """A spatial transformer network (Jaderberg et al.) on 28 x 28 digits: a small
    localization net predicts an affine transform, the image is resampled through it with
    F.grid_sample (GridSample, border padding), then classified. PyTorch 1.13 cannot export
    F.affine_grid, so the sampling grid is the pixel-centre mesh times theta, as exported
    STNs write it."""

    def __init__(self, size=28, classes=10):
        super().__init__()
        self.loc = nn.Sequential(nn.Conv2d(1, 8, 5, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                                 nn.Flatten(), nn.Linear(8, 6))
        self.cls = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(),
                                 nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, classes))
        ticks = (torch.arange(size, dtype=torch.float32) * 2 + 1) / size - 1
        ys, xs = torch.meshgrid(ticks, ticks, indexing="ij")
        self.register_buffer("mesh", torch.stack([xs, ys, torch.ones_like(xs)], -1).view(-1, 3))
        self.register_buffer("identity", torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]))
        self.size = size

    def forward(self, image):
        theta = self.loc(image).view(-1, 2, 3) * 0.1 + self.identity
        grid = torch.matmul(self.mesh, theta.transpose(1, 2)).view(-1, self.size, self.size, 2)
        warped = F.grid_sample(image, grid, mode="bilinear", padding_mode="border",
                               align_corners=False)
        return self.cls(warped)


class MessagePassingGnn(nn.Module):
    """A two-layer graph network as PyTorch Geometric writes one, in plain torch: each
    edge's message gathered from its source node, summed onto its target with
    scatter_add (ScatterElements with reduction add in the export), then the top-k nodes
    by score picked with torch.gather (GatherElements). Nodes and edges are dynamic."""

    def __init__(self, features=16, hidden=32, k=4, classes=3):
        super().__init__()
        self.lin1 = nn.Linear(features, hidden)
        self.lin2 = nn.Linear(hidden, hidden)
        self.score = nn.Linear(hidden, 1)
        self.head = nn.Linear(hidden, classes)
        self.hidden = hidden
        self.k = k

    def propagate(self, x, edge_index, lin):
        h = lin(x)
        msg = h[edge_index[0]]
        # A constant width: PyTorch 1.13 exports scatter_add only when it can see that
        # the index and the source have the same dims.
        target = edge_index[1].unsqueeze(-1).expand(-1, self.hidden)
        return F.relu(h + torch.zeros_like(h).scatter_add(0, target, msg))

    def forward(self, node_features, edge_index):
        h = self.propagate(node_features, edge_index, self.lin1)
        h = self.propagate(h, edge_index, self.lin2)
        top = torch.topk(self.score(h).squeeze(-1), self.k).indices
        picked = torch.gather(h, 0, top.unsqueeze(-1).expand(-1, self.hidden))
        return self.head(picked.mean(0, keepdim=True))


# ---------------------------------------------------------------------------------------
# The model table


class LengthMaskedPool(nn.Module):
    """A padded batch pooled by its lengths, as speech and text models write it: the batch
    trimmed to its longest sequence (`x[:, :lengths.max()]`: a Slice bound computed from
    data) and a padding mask from `torch.arange(lengths.max()) < lengths[:, None]` (a Range
    whose limit is data), then a masked mean and a linear layer."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 5)

    def forward(self, features, lengths):
        longest = lengths.max()
        x = features[:, :longest]
        mask = (torch.arange(longest) < lengths.unsqueeze(1)).unsqueeze(2).to(x.dtype)
        pooled = (x * mask).sum(1) / lengths.unsqueeze(1).to(x.dtype)
        return self.proj(pooled)


class EmbeddingBagRanker(nn.Module):
    """Two bag-of-ids features as recommender models read them, each a flat list of ids and
    the offset where each bag starts (nn.EmbeddingBag with offsets): item ids averaged
    (mode 'mean'), tag ids summed (mode 'sum'), both into a small MLP head. PyTorch exports
    each bag as a Loop over the bags whose body slices the ids between two offsets read
    from data, gathers the rows and reduces them (ReduceMean, ReduceSum). The bag count
    and both id counts are dynamic. One input set has empty bags: PyTorch gives an empty
    bag zeros, and so do ReduceMean and ReduceSum of nothing (ONNX Runtime's and
    ndserve's)."""

    def __init__(self, items=1000, tags=200):
        super().__init__()
        self.items = nn.EmbeddingBag(items, 32, mode="mean")
        self.tags = nn.EmbeddingBag(tags, 16, mode="sum")
        self.head = nn.Sequential(nn.Linear(48, 32), nn.ReLU(), nn.Linear(32, 4))

    def forward(self, item_ids, item_offsets, tag_ids, tag_offsets):
        return self.head(torch.cat([self.items(item_ids, item_offsets),
                                    self.tags(tag_ids, tag_offsets)], 1))


def bags_set(bags, longest_item_bag, longest_tag_bag, items=1000, tags=200, empty=()):
    """Flat INT64 ids and bag offsets for EmbeddingBagRanker: `bags` bags of each feature,
    every bag 1..longest ids long, one of each as long as allowed, except the bags listed
    in `empty`, which have none."""
    def ids_and_offsets(rng, longest, vocab):
        lengths = rng.integers(1, longest + 1, size=(bags,))
        lengths[rng.integers(0, bags)] = longest
        for e in empty:
            lengths[e] = 0
        offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        return rng.integers(0, vocab, size=(int(lengths.sum()),), dtype=np.int64), offsets

    def make(rng):
        return [*ids_and_offsets(rng, longest_item_bag, items),
                *ids_and_offsets(rng, longest_tag_bag, tags)]

    return make


def elman_stack(x, h, w_ih, w_hh, b, w_out, b_out):
    """A stacked Elman RNN written as a TorchScript loop over time steps with a nested loop
    over layers: x [batch, steps, hidden], h [layers, batch, hidden]. Returns the top
    layer's states stacked along time (torch.stack of a list), per-step logits joined by
    torch.cat of a list, and the last hidden state of every layer."""
    states: List[torch.Tensor] = []
    logits: List[torch.Tensor] = []
    for t in range(x.size(1)):
        inp = x[:, t]
        layers: List[torch.Tensor] = []
        for layer in range(w_ih.size(0)):
            inp = torch.tanh(torch.matmul(inp, w_ih[layer].t()) +
                             torch.matmul(h[layer], w_hh[layer].t()) + b[layer])
            layers.append(inp)
        h = torch.stack(layers, 0)
        states.append(inp)
        logits.append((torch.matmul(inp, w_out.t()) + b_out).unsqueeze(1))
    return torch.stack(states, 1), torch.cat(logits, 1), h


class ScriptedRnnLoop(nn.Module):
    """A hand-written RNN as research code writes one: forward calls a torch.jit.script
    function (elman_stack) that loops `for t in range(x.size(1))` over a dynamic sequence,
    with a nested loop over two layers, and appends to lists. The export keeps the loops
    as ONNX Loop (the outer one's trip count is the sequence length, read from the input's
    shape) and each list as SequenceEmpty carried through the Loop, one SequenceInsert
    per iteration and a ConcatFromSequence after it (stack: new_axis 1; cat: new_axis 0),
    the inner list inside the outer body."""

    def __init__(self, features=8, hidden=16, layers=2, classes=5):
        super().__init__()
        self.inp = nn.Linear(features, hidden)
        self.h0 = nn.Linear(features, hidden)
        scale = hidden ** -0.5
        self.w_ih = nn.Parameter(torch.randn(layers, hidden, hidden) * scale)
        self.w_hh = nn.Parameter(torch.randn(layers, hidden, hidden) * scale)
        self.b = nn.Parameter(torch.randn(layers, hidden) * 0.1)
        self.out = nn.Linear(hidden, classes)
        self.layers = layers
        self.loop = torch.jit.script(elman_stack)

    def forward(self, features):
        h0 = torch.tanh(self.h0(features.mean(1))).unsqueeze(0).expand(self.layers, -1, -1)
        return self.loop(self.inp(features), h0, self.w_ih, self.w_hh, self.b,
                         self.out.weight, self.out.bias)


def gru_decode_step(prev, h, emb, w_ih, w_hh, b_ih, b_hh, w_out, b_out, eos_bonus,
                    step: int):
    """One GRU decoder step (nn.GRUCell's equations) from the previous token ids: the new
    hidden state and log-probabilities, with an EOS bonus growing with the step."""
    gi = torch.matmul(emb[prev], w_ih.t()) + b_ih
    gh = torch.matmul(h, w_hh.t()) + b_hh
    i_r, i_z, i_n = gi.chunk(3, 1)
    h_r, h_z, h_n = gh.chunk(3, 1)
    r = torch.sigmoid(i_r + h_r)
    z = torch.sigmoid(i_z + h_z)
    n = torch.tanh(i_n + r * h_n)
    h = (1.0 - z) * n + z * h
    logits = torch.matmul(h, w_out.t()) + b_out + eos_bonus * float(step)
    return h, torch.log_softmax(logits, 1)


def greedy_decode(h, emb, w_ih, w_hh, b_ih, b_hh, w_out, b_out, eos_bonus, max_len: int,
                  bos: int, eos: int):
    """Greedy decoding until every row has produced EOS or max_len steps have run: the
    tokens so far grow by one column per step (a carried value whose shape changes), the
    chosen log-probabilities go to a list, and a finished batch breaks out of the loop."""
    prev = torch.full([h.size(0)], bos, dtype=torch.long)
    tokens = prev.unsqueeze(1)
    done = torch.zeros([h.size(0)], dtype=torch.bool)
    scores: List[torch.Tensor] = []
    for step in range(max_len):
        h, logp = gru_decode_step(prev, h, emb, w_ih, w_hh, b_ih, b_hh, w_out, b_out,
                                  eos_bonus, step)
        best, nxt = logp.max(1)
        # masked_fill, not torch.where(done, full_like(...)): the exporter types a scripted
        # full_like as FLOAT, and the Where then mixes FLOAT and INT64.
        nxt = nxt.masked_fill(done, eos)
        scores.append(best.masked_fill(done, 0.0))
        tokens = torch.cat([tokens, nxt.unsqueeze(1)], 1)
        done = done | (nxt == eos)
        prev = nxt
        if bool(done.all()):
            break
    return tokens, torch.stack(scores, 1)


class GreedyDecoder(nn.Module):
    """A tiny GRU decoder run greedily from an encoded vector, as seq2seq and captioning
    models decode: forward calls a torch.jit.script function whose `for step in
    range(max_len)` loop breaks once every row has emitted EOS (the export's Loop has a
    data-dependent condition, with an If inside the body), feeds each argmax back as the
    next input, grows the INT64 token matrix by a torch.cat per step and stacks the
    chosen log-probabilities. Rows that finish early are padded with EOS. Random weights
    would rarely say EOS, so its logit starts lower and gains EOS_BONUS per step; the
    reference's argmax margins are checked (`check`) so float rounding cannot pick
    another token. Input sets: b2 runs all MAX_LEN steps (a row never says EOS), b1
    breaks out after 9, b5 ends on the last step with a row that says EOS at once. The
    export declares the carried token matrix [batch, 1] in the body's inputs, as traced;
    it is [batch, 1 + step] at each step."""

    MAX_LEN, BOS, EOS = 10, 1, 0
    EOS_BONUS = 0.08
    MIN_MARGIN = 1e-4

    def __init__(self, features=16, hidden=32, vocab=16, embed=16):
        super().__init__()
        self.init = nn.Linear(features, hidden)
        self.emb = nn.Embedding(vocab, embed)
        self.cell = nn.GRUCell(embed, hidden)
        self.out = nn.Linear(hidden, vocab)
        with torch.no_grad():
            self.out.weight.mul_(1.5)
        self.register_buffer("eos_bonus", F.one_hot(torch.tensor(self.EOS), vocab).float()
                             * self.EOS_BONUS)
        self.decode = torch.jit.script(greedy_decode)

    def weights(self):
        c = self.cell
        return (self.emb.weight, c.weight_ih, c.weight_hh, c.bias_ih, c.bias_hh,
                self.out.weight, self.out.bias, self.eos_bonus)

    def forward(self, encoded):
        return self.decode(torch.tanh(self.init(encoded)), *self.weights(), self.MAX_LEN,
                           self.BOS, self.EOS)

    @classmethod
    def check(cls, outputs, inputs, model):
        """Replays the decode on the reference tokens: every argmax of an unfinished row
        wins by MIN_MARGIN in log-probability, and it is the reference's token."""
        tokens = torch.from_numpy(outputs[0])
        with torch.no_grad():
            h = torch.tanh(model.init(torch.from_numpy(inputs[0])))
            done = torch.zeros(tokens.shape[0], dtype=torch.bool)
            prev = tokens[:, 0]
            for step in range(tokens.shape[1] - 1):
                h, logp = gru_decode_step(prev, h, *model.weights(), step)
                top = logp.topk(2, 1).values
                margin = (top[:, 0] - top[:, 1])[~done]
                if margin.numel() and float(margin.min()) < cls.MIN_MARGIN:
                    return f"step {step}: an argmax wins by {float(margin.min()):g} only"
                nxt = logp.argmax(1).masked_fill(done, cls.EOS)
                if not bool((nxt == tokens[:, step + 1]).all()):
                    return f"step {step}: the replay picks other tokens"
                done = done | (nxt == cls.EOS)
                prev = nxt
        return None


def encoded_set(batch, features=16):
    def make(rng):
        return [rng.standard_normal((batch, features)).astype(np.float32)]

    return make


class SsdliteDetector(nn.Module):
    """torchvision's SSDlite (MobileNetV3-Large backbone, 320 x 320) on one image, four
    classes: its export holds the detection post-processing torchvision writes for every
    detector (score filter by NonZero/GatherND, per-level TopK, batched_nms as an If
    around NonMaxSuppression, boxes clipped to the image). Random weights give every class
    the same score, so the convolutions are redrawn He-scaled and the class logits scaled
    to spread the scores; the score threshold keeps a few boxes whose scores lie far enough
    apart that float rounding cannot reorder them (checked in `check`)."""

    SCORE_THRESH = 0.55

    def __init__(self):
        super().__init__()
        from torchvision.models.detection import ssdlite320_mobilenet_v3_large
        self.det = ssdlite320_mobilenet_v3_large(
            weights=None, weights_backbone=None, num_classes=4,
            score_thresh=self.SCORE_THRESH, detections_per_img=10)
        g = torch.Generator().manual_seed(SEED)
        with torch.no_grad():
            for mod in self.det.modules():
                if isinstance(mod, nn.Conv2d):
                    fan_in = mod.in_channels // mod.groups * mod.kernel_size[0] * mod.kernel_size[1]
                    mod.weight.copy_(torch.randn(mod.weight.shape, generator=g) * (2.0 / fan_in) ** 0.5)
                    if mod.bias is not None:
                        mod.bias.copy_(torch.randn(mod.bias.shape, generator=g) * 0.1)
            for mod in self.det.head.classification_head.modules():
                if isinstance(mod, nn.Conv2d) and mod.kernel_size == (1, 1):
                    mod.weight.mul_(0.1)

    def forward(self, image):
        out = self.det([image[0]])[0]
        return out["boxes"], out["scores"], out["labels"]

    @classmethod
    def check(cls, outputs, inputs, model):
        """Scores at least 1e-4 apart and from the threshold, and some boxes found."""
        scores = np.sort(outputs[1])[::-1]
        if scores.size == 0:
            return "no detections"
        gaps = np.concatenate([np.diff(-scores), [scores[-1] - cls.SCORE_THRESH]])
        if gaps.min() < 1e-4:
            return f"scores {scores.tolist()} closer than 1e-4"
        return None


class Spec:
    """One model: how to build it, its graph inputs/outputs, and its input sets."""

    def __init__(self, name, build, inputs, outputs, dynamic, sets, calibrate=None, fp16=False,
                 check=None):
        self.name = name
        self.build = build  # () -> nn.Module
        self.inputs = inputs  # input names, in forward()'s order
        self.outputs = outputs  # output names
        self.dynamic = dynamic  # dynamic_axes for torch.onnx.export
        self.sets = sets  # [(set name, (rng) -> [np.ndarray per input])]
        self.calibrate = calibrate  # (rng) -> inputs for BN calibration, or None
        self.fp16 = fp16  # also write the FP16 twin <name>_fp16 (its first two input sets)
        self.check = check  # (reference outputs, inputs, model) -> None, or why the set
        #                     is unusable


def image_set(batch, size=224):
    def make(rng):
        return [rng.standard_normal((batch, 3, size, size)).astype(np.float32)]

    return make


def lengths_set(batch, padded, longest):
    """Features [batch, padded, 8] and INT64 lengths in 1..longest, one of them longest."""
    def make(rng):
        lengths = rng.integers(1, longest + 1, size=(batch,)).astype(np.int64)
        lengths[0] = longest
        return [rng.standard_normal((batch, padded, 8)).astype(np.float32), lengths]

    return make


def unit_image_set(height, width):
    """One RGB image with values in [0, 1], as torchvision's detectors take them."""
    def make(rng):
        return [rng.uniform(0.0, 1.0, (1, 3, height, width)).astype(np.float32)]

    return make


def volume_set(*shape):
    """One float input of exactly this shape: clips (N, 3, T, H, W), volumes (N, 1, D, H, W)."""
    def make(rng):
        return [rng.standard_normal(shape).astype(np.float32)]

    return make


def graph_set(nodes, edges, features=16):
    """Node features and an INT64 [2, edges] edge list with every node id in range."""
    def make(rng):
        x = rng.standard_normal((nodes, features)).astype(np.float32)
        return [x, rng.integers(0, nodes, size=(2, edges), dtype=np.int64)]

    return make


def token_set(batch, seq, vocab, with_mask, pad_last=0):
    def make(rng):
        ids = rng.integers(0, vocab, size=(batch, seq), dtype=np.int64)
        if not with_mask:
            return [ids]
        mask = np.ones((batch, seq), dtype=np.int64)
        if pad_last and batch > 1:
            # The last row is padded at the end: its masked tokens must not change the rest.
            mask[-1, seq - pad_last:] = 0
            ids[-1, seq - pad_last:] = 0
        return [ids, mask]

    return make


def feature_set(batch, seq, features):
    def make(rng):
        return [rng.standard_normal((batch, seq, features)).astype(np.float32)]

    return make


def torchvision_model(name):
    def build():
        return getattr(torchvision.models, name)(weights=None)

    return build


CNN_DYNAMIC = {"images": {0: "batch"}, "logits": {0: "batch"}}


def tiny_swin():
    """torchvision's Swin Transformer code at a tenth of swin_t's width, for 32 x 32
    images: shifted-window masks built by indexed assignment (ScatterND in the export),
    Mod in the window arithmetic, relative position bias gathers."""
    from torchvision.models.swin_transformer import SwinTransformer
    return SwinTransformer(patch_size=[4, 4], embed_dim=24, depths=[2, 2], num_heads=[2, 4],
                           window_size=[4, 4], stochastic_depth_prob=0.0, num_classes=10)


def cnn(name, sets, fp16=False):
    return Spec(name, torchvision_model(name), ["images"], ["logits"], CNN_DYNAMIC, sets,
                calibrate=image_set(2), fp16=fp16)


MODELS = [
    cnn("resnet18", [("b1", image_set(1)), ("b3", image_set(3)), ("b8", image_set(8))],
        fp16=True),
    cnn("mobilenet_v2", [("b1", image_set(1)), ("b2", image_set(2))]),
    cnn("mobilenet_v3_small", [("b1", image_set(1)), ("b2", image_set(2))]),
    cnn("squeezenet1_0", [("b1", image_set(1)), ("b2", image_set(2))]),
    cnn("densenet121", [("b1", image_set(1)), ("b2", image_set(2))]),
    cnn("efficientnet_b0", [("b1", image_set(1)), ("b2", image_set(2))]),
    Spec("bert_encoder", BertEncoder, ["input_ids", "attention_mask"],
         ["last_hidden_state", "pooler_output"],
         {"input_ids": {0: "batch", 1: "sequence"},
          "attention_mask": {0: "batch", 1: "sequence"},
          "last_hidden_state": {0: "batch", 1: "sequence"},
          "pooler_output": {0: "batch"}},
         [("b2_s16", token_set(2, 16, 1000, True, pad_last=5)),
          ("b1_s40", token_set(1, 40, 1000, True)),
          ("b8_s32", token_set(8, 32, 1000, True, pad_last=7)),
          ("b1_s128", token_set(1, 128, 1000, True))], fp16=True),
    Spec("gpt_decoder", GptDecoder, ["input_ids"], ["logits"],
         {"input_ids": {0: "batch", 1: "sequence"}, "logits": {0: "batch", 1: "sequence"}},
         [("b2_s12", token_set(2, 12, 1000, False)),
          ("b1_s20", token_set(1, 20, 1000, False)),
          ("b8_s32", token_set(8, 32, 1000, False))]),
    Spec("lstm_classifier", LstmClassifier, ["input_ids"], ["logits"],
         {"input_ids": {0: "batch", 1: "sequence"}, "logits": {0: "batch"}},
         [("b2_s10", token_set(2, 10, 500, False)),
          ("b1_s17", token_set(1, 17, 500, False)),
          ("b1_s32", token_set(1, 32, 500, False))], fp16=True),
    Spec("gru_tagger", GruTagger, ["features"], ["tags"],
         {"features": {0: "batch", 1: "sequence"}, "tags": {0: "batch", 1: "sequence"}},
         [("b2_s9", feature_set(2, 9, 16)), ("b3_s5", feature_set(3, 5, 16))]),
    Spec("conv_autoencoder", ConvAutoencoder, ["image"], ["mask", "downsampled"],
         {"image": {0: "batch"}, "mask": {0: "batch"}, "downsampled": {0: "batch"}},
         [("b1", image_set(1, 64)), ("b2", image_set(2, 64))], calibrate=image_set(8, 64)),
    Spec("swin_tiny", tiny_swin, ["images"], ["logits"], CNN_DYNAMIC,
         [("b1", image_set(1, 32)), ("b2", image_set(2, 32))]),
    Spec("groupnorm_unet", GroupNormUNet, ["image"], ["denoised"],
         {"image": {0: "batch", 2: "height", 3: "width"},
          "denoised": {0: "batch", 2: "height", 3: "width"}},
         [("b1_32", image_set(1, 32)), ("b2_48", image_set(2, 48))]),
    Spec("video_resnet_tiny", TinyVideoResNet, ["clips"], ["logits"],
         {"clips": {0: "batch"}, "logits": {0: "batch"}},
         [("b1", volume_set(1, 3, 8, 32, 32)), ("b2", volume_set(2, 3, 8, 32, 32))],
         calibrate=volume_set(4, 3, 8, 32, 32)),
    Spec("unet3d_tiny", TinyUNet3d, ["volume"], ["logits"],
         {"volume": {0: "batch", 2: "depth", 3: "height", 4: "width"},
          "logits": {0: "batch", 2: "depth", 3: "height", 4: "width"}},
         [("b1_16", volume_set(1, 1, 16, 16, 16)), ("b2_8x12x16", volume_set(2, 1, 8, 12, 16))]),
    Spec("vdsr_tiny", TinyVdsr, ["image"], ["upscaled"],
         {"image": {0: "batch", 2: "height", 3: "width"},
          "upscaled": {0: "batch", 2: "height", 3: "width"}},
         [("b1_24", image_set(1, 24)), ("b2_17", image_set(2, 17))]),
    Spec("stn_classifier", SpatialTransformer, ["image"], ["logits"],
         {"image": {0: "batch"}, "logits": {0: "batch"}},
         [("b1", volume_set(1, 1, 28, 28)), ("b3", volume_set(3, 1, 28, 28))]),
    Spec("gnn_message_passing", MessagePassingGnn, ["node_features", "edge_index"], ["logits"],
         {"node_features": {0: "nodes"}, "edge_index": {1: "edges"}},
         [("n10_e30", graph_set(10, 30)), ("n25_e80", graph_set(25, 80))]),
    Spec("length_masked_pool", LengthMaskedPool, ["features", "lengths"], ["pooled"],
         {"features": {0: "batch", 1: "padded"}, "lengths": {0: "batch"},
          "pooled": {0: "batch"}},
         [("b3_p12_l9", lengths_set(3, 12, 9)), ("b5_p20_l20", lengths_set(5, 20, 20))]),
    Spec("ssdlite_detector", SsdliteDetector, ["image"], ["boxes", "scores", "labels"],
         {"image": {2: "height", 3: "width"}, "boxes": {0: "detections"},
          "scores": {0: "detections"}, "labels": {0: "detections"}},
         [("h320_w320", unit_image_set(320, 320)), ("h240_w288", unit_image_set(240, 288))],
         check=SsdliteDetector.check),
    Spec("embedding_bag_offsets", EmbeddingBagRanker,
         ["item_ids", "item_offsets", "tag_ids", "tag_offsets"], ["scores"],
         {"item_ids": {0: "items"}, "item_offsets": {0: "batch"}, "tag_ids": {0: "tags"},
          "tag_offsets": {0: "batch"}, "scores": {0: "batch"}},
         [("b3", bags_set(3, 5, 3)), ("b1", bags_set(1, 4, 2)), ("b8", bags_set(8, 9, 6)),
          ("b4_empty_bags", bags_set(4, 6, 4, empty=(1, 3)))]),
    Spec("scripted_rnn_loop", ScriptedRnnLoop, ["features"], ["states", "logits", "last"],
         {"features": {0: "batch", 1: "sequence"}, "states": {0: "batch", 1: "sequence"},
          "logits": {0: "batch", 1: "sequence"}, "last": {1: "batch"}},
         [("b2_s5", feature_set(2, 5, 8)), ("b3_s11", feature_set(3, 11, 8)),
          ("b1_s1", feature_set(1, 1, 8))]),
    Spec("greedy_decoder", GreedyDecoder, ["encoded"], ["tokens", "scores"],
         {"encoded": {0: "batch"}, "tokens": {0: "batch", 1: "length"},
          "scores": {0: "batch", 1: "steps"}},
         [("b2", encoded_set(2)), ("b1", encoded_set(1)), ("b5", encoded_set(5))],
         check=GreedyDecoder.check),
]


# ---------------------------------------------------------------------------------------
# Export and references


def calibrate_batchnorm(model, make_inputs, rng):
    """Running stats from a few random batches (cumulative average), then eval mode."""
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns or make_inputs is None:
        return
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None
    model.train()
    with torch.no_grad():
        for _ in range(2):
            model(*[torch.from_numpy(a) for a in make_inputs(rng)])
    model.eval()


def export(model, spec, example):
    buf = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(model, tuple(torch.from_numpy(a) for a in example), buf,
                          opset_version=OPSET, input_names=spec.inputs,
                          output_names=spec.outputs, dynamic_axes=spec.dynamic,
                          do_constant_folding=True)
    proto = onnx.load_from_string(buf.getvalue())
    onnx.checker.check_model(proto)
    return proto


def run_reference(model, arrays):
    with torch.no_grad():
        out = model(*[torch.from_numpy(a) for a in arrays])
    if isinstance(out, torch.Tensor):
        out = (out,)
    # Integer outputs (a detector's labels) keep their type; floats are compared as FP32.
    return [o.detach().numpy() if not o.is_floating_point() else
            o.detach().numpy().astype(np.float32) for o in out]


def le_bytes(a):
    a = np.ascontiguousarray(a)
    if a.dtype == np.bool_:
        return a.astype(np.uint8).tobytes()
    return a.astype(a.dtype.newbyteorder("<")).tobytes()


def dims_text(shape):
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


def write_file(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def write_case(case_dir, spec, inputs, outputs, atol_fraction=ATOL_FRACTION, rtol=RTOL):
    lines = [HEADER.rstrip("\n"), "model ../../1/model.onnx"]
    for name, arr in zip(spec.inputs, inputs):
        fname = f"in_{name}.bin"
        write_file(os.path.join(case_dir, fname), le_bytes(arr))
        lines.append(f"input {name} {DTYPE_NAME[arr.dtype]} {dims_text(arr.shape)} {fname}")
    loosest = 0.0
    tolerances = []
    for name, arr in zip(spec.outputs, outputs):
        fname = f"out_{name}.bin"
        write_file(os.path.join(case_dir, fname), le_bytes(arr))
        lines.append(f"output {name} {DTYPE_NAME[arr.dtype]} {dims_text(arr.shape)} {fname}")
        peak = float(np.max(np.abs(arr)))
        if not np.isfinite(arr).all():
            raise SystemExit(f"{spec.name}: output '{name}' has non-finite values")
        if peak <= MIN_MAX_ABS:
            raise SystemExit(f"{spec.name}: output '{name}' has max|reference| {peak:g} "
                             f"<= {MIN_MAX_ABS:g}: the model is numerically dead")
        atol = atol_fraction * peak
        loosest = max(loosest, atol)
        tolerances.append(f"output_tolerance {name} {atol:.6g} {rtol:g}")
    lines += tolerances
    lines.append(f"tolerance {loosest:.6g} {rtol:g}")
    write_file(os.path.join(case_dir, "case.txt"), "\n".join(lines) + "\n")


def write_model(model_dir, proto):
    """<model_dir>/1/model.onnx and ops.txt; returns {op type: count}."""
    write_file(os.path.join(model_dir, "1", "model.onnx"),
               proto.SerializeToString(deterministic=True))
    counts = {}

    def count(graph):  # the nodes of Loop bodies and If branches too
        for node in graph.node:
            counts[node.op_type] = counts.get(node.op_type, 0) + 1
            for a in node.attribute:
                for g in [a.g] if a.type == onnx.AttributeProto.GRAPH else a.graphs:
                    count(g)

    count(proto.graph)
    write_file(os.path.join(model_dir, "ops.txt"),
               "".join(f"{op} {n}\n" for op, n in sorted(counts.items())))
    return counts


def generate(spec, out_dir):
    torch.manual_seed(SEED)
    rng = np.random.default_rng(SEED)
    model = spec.build()
    model.eval()
    calibrate_batchnorm(model, spec.calibrate, rng)
    model.eval()

    sets = [(name, make(rng)) for name, make in spec.sets]
    proto = export(model, spec, sets[0][1])
    model_dir = os.path.join(out_dir, spec.name)
    shutil.rmtree(model_dir, ignore_errors=True)  # --only: no input set of an older version
    counts = write_model(model_dir, proto)

    names = [vi.name for vi in proto.graph.input]
    if names != spec.inputs:
        raise SystemExit(f"{spec.name}: exported inputs {names}, want {spec.inputs}")
    names = [vi.name for vi in proto.graph.output]
    if names != spec.outputs:
        raise SystemExit(f"{spec.name}: exported outputs {names}, want {spec.outputs}")

    for set_name, arrays in sets:
        outputs = run_reference(model, arrays)
        if len(outputs) != len(spec.outputs):
            raise SystemExit(f"{spec.name}: {len(outputs)} outputs, want {len(spec.outputs)}")
        problem = spec.check(outputs, arrays, model) if spec.check else None
        if problem:
            raise SystemExit(f"{spec.name}: input set {set_name}: {problem}")
        write_case(os.path.join(model_dir, "cases", set_name), spec, arrays, outputs)
    if spec.fp16:
        generate_fp16_twin(spec, model, proto, sets[:2], out_dir)
    return sorted(counts)


def fp16_array(a):
    return np.clip(a, -FP16_MAX, FP16_MAX).astype(np.float16)


def to_fp16(proto):
    """The export with every FLOAT tensor, type and Cast target made FLOAT16 (in place)."""
    from onnx import numpy_helper
    FLOAT, FLOAT16 = onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16

    def convert(t):
        if t.data_type == FLOAT:
            t.CopyFrom(numpy_helper.from_array(fp16_array(numpy_helper.to_array(t)), t.name))

    g = proto.graph
    for t in g.initializer:
        convert(t)
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.type.tensor_type.elem_type == FLOAT:
            vi.type.tensor_type.elem_type = FLOAT16
    for node in g.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                convert(a.t)
            elif node.op_type == "Cast" and a.name == "to" and a.i == FLOAT:
                a.i = FLOAT16
            elif a.name in ("value_float", "value_floats"):
                raise SystemExit(f"{node.name}: Constant {a.name} has no FP16 form")
    onnx.checker.check_model(proto)
    return proto


def generate_fp16_twin(spec, model, proto, sets, out_dir):
    twin = copy.deepcopy(model)
    with torch.no_grad():
        for t in list(twin.parameters()) + list(twin.buffers()):
            if t.is_floating_point():
                t.copy_(t.half().float())
    model_dir = os.path.join(out_dir, spec.name + "_fp16")
    shutil.rmtree(model_dir, ignore_errors=True)
    write_model(model_dir, to_fp16(copy.deepcopy(proto)))
    for set_name, arrays in sets:
        inputs = [fp16_array(a) if a.dtype == np.float32 else a for a in arrays]
        wide = [a.astype(np.float32) if a.dtype == np.float16 else a for a in inputs]
        outputs = [fp16_array(o) for o in run_reference(twin, wide)]
        write_case(os.path.join(model_dir, "cases", set_name), spec, inputs, outputs,
                   FP16_ATOL_FRACTION, FP16_RTOL)


@contextlib.contextmanager
def locked(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="output folder (default: --print-dir's)")
    parser.add_argument("--only", help="comma-separated model names (no DONE file then)")
    parser.add_argument("--print-dir", action="store_true",
                        help="print the cache folder of this version of the generator and exit")
    args = parser.parse_args(argv)
    if args.print_dir:
        print(default_cache_dir())
        return 0
    out = os.path.abspath(args.out or default_cache_dir())
    specs = MODELS
    if args.only:
        wanted = args.only.split(",")
        unknown = set(wanted) - {s.name for s in MODELS}
        if unknown:
            raise SystemExit(f"unknown models: {sorted(unknown)}")
        specs = [s for s in MODELS if s.name in wanted]

    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    with locked(os.path.join(os.path.dirname(out), ".lock")):
        done = os.path.join(out, "DONE")
        if not args.only and os.path.exists(done):
            os.utime(done)  # newer than this file, so the build rule stays satisfied
            print(f"gen_torch_models: {out} is complete")
            return 0
        start = time.monotonic()
        staging = out + f".partial-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        if args.only and os.path.isdir(out):
            shutil.copytree(out, staging)
        for spec in specs:
            t = time.monotonic()
            ops = generate(spec, staging)
            print(f"gen_torch_models: {spec.name}: {len(ops)} op types, "
                  f"{time.monotonic() - t:.1f} s", flush=True)
        took = time.monotonic() - start
        if not args.only:
            write_file(os.path.join(staging, "DONE"),
                       f"torch {torch.__version__}\ntorchvision {torchvision.__version__}\n"
                       f"onnx {onnx.__version__}\nseconds {took:.1f}\n")
        shutil.rmtree(out, ignore_errors=True)
        os.replace(staging, out)
        # Older versions of this generator left their own folders: they are dead weight.
        if not args.only:
            parent = os.path.dirname(out)
            for entry in os.listdir(parent):
                path = os.path.join(parent, entry)
                if path != out and os.path.isdir(path):
                    shutil.rmtree(path, ignore_errors=True)
        print(f"gen_torch_models: wrote {len(specs)} models to {out} in {took:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
