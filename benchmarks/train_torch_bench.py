#!/usr/bin/python3
"""PyTorch's half of benchmarks/train_benchmark.cc: training steps per second of the
example models (examples/models, tools/gen_models.py) at batch 256, same loss and optimizer
(SGD lr 0.01; recsys's tables as sparse embeddings, as ndserve updates only their looked-up
rows), on --threads threads (default 1).

  /usr/bin/python3 benchmarks/train_torch_bench.py [--threads N] [--seconds S]
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 256


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.ModuleList([nn.Linear(64, 128), nn.Linear(128, 64), nn.Linear(64, 10)])

    def forward(self, x):
        x = torch.relu(self.fc[0](x))
        x = torch.relu(self.fc[1](x))
        return self.fc[2](x)


class Recsys(nn.Module):
    def __init__(self):
        super().__init__()
        self.tables = nn.ModuleList([nn.Embedding(100_000, 32, sparse=True) for _ in range(4)])
        self.fc = nn.ModuleList([nn.Linear(141, 64), nn.Linear(64, 32), nn.Linear(32, 1)])

    def forward(self, ids, dense):
        bags = [self.tables[f](ids[:, f, :]).mean(dim=1) for f in range(4)]
        x = torch.cat(bags + [dense], dim=1)
        x = torch.relu(self.fc[0](x))
        x = torch.relu(self.fc[1](x))
        return self.fc[2](x)


def bench(name, seconds):
    gen = torch.Generator().manual_seed(7)
    if name == "mlp":
        model = Mlp()
        x = torch.randn(BATCH, 64, generator=gen)
        labels = torch.arange(BATCH) % 10

        def loss():
            return F.cross_entropy(model(x), labels)
    else:
        model = Recsys()
        ids = torch.randint(0, 100_000, (BATCH, 4, 8), generator=gen)
        dense = torch.randn(BATCH, 13, generator=gen)
        clicks = (torch.arange(BATCH) % 2).float().reshape(-1, 1)

        def loss():
            return F.binary_cross_entropy_with_logits(model(ids, dense), clicks)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step():
        opt.zero_grad()
        loss().backward()
        opt.step()

    for _ in range(20):
        step()
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        step()
        steps += 1
    return steps / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for name in ("mlp", "recsys"):
        print(f"torch {name} batch {BATCH} threads {args.threads}: {bench(name, args.seconds):.1f} steps/s")


if __name__ == "__main__":
    main()
