#!/usr/bin/env python3
"""Writes the README's supported-operator table from kernels/ops.def, the one list.

  tools/gen_op_table.py            # rewrite the table in README.md in place
  tools/gen_op_table.py --check    # exit 1 (with a diff) when README.md is out of date

The table sits between the markers <!-- ops:begin --> and <!-- ops:end -->. Standard
library only, so any python3 runs it.
"""
import argparse
import difflib
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- ops:begin -->", "<!-- ops:end -->"
ROW = re.compile(r"^NDS_OP\(\s*(\w+),\s*(\d+),\s*(\w+),\s*(\w+),\s*(\w+),\s*(\w+),\s*(\w+)\s*\)")


def max_opset():
    text = (ROOT / "kernels/op_kind.h").read_text()
    return int(re.search(r"kMaxOpset = (\d+);", text).group(1))


def rows():
    out = []
    for line in (ROOT / "kernels/ops.def").read_text().splitlines():
        m = ROW.match(line.strip())
        if m:
            name, since, _rules, cpu, cuda, host, flags = m.groups()
            out.append((name, int(since), cpu != "NoKernel", cuda != "NoKernel", int(host, 0),
                        flags))
    return out


def table():
    last = max_opset()
    lines = [
        BEGIN,
        "| operator | opsets | CPU | CUDA | inputs read on the host |",
        "|---|---|---|---|---|",
    ]
    for name, since, cpu, cuda, host, flags in sorted(rows()):
        positions = [str(i) for i in range(32) if host >> i & 1]
        notes = ", ".join(positions) if positions else ""
        if "kOpAlias" in flags:
            notes = (notes + "; " if notes else "") + "aliases its input (no copy)"
        if "kOpReadsShapes" in flags:
            notes = (notes + "; " if notes else "") + "reads only its input's shape"
        if "kOpDataShape" in flags:
            notes = (notes + "; " if notes else "") + "output dims depend on the data"
        if "kOpControl" in flags:
            # No kernel: the loader inlines the subgraphs and the engine runs them.
            what = "body inlined at load, run per iteration" if name == "Loop" \
                else "branches inlined at load"
            notes = (notes + "; " if notes else "") + what
            cpu = cuda = True
        lines.append(f"| {name} | {since}–{last} | {'yes' if cpu else '—'} | "
                     f"{'yes' if cuda else '—'} | {notes} |")
    lines.append(END)
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--readme", default=str(ROOT / "README.md"))
    args = parser.parse_args()
    readme = pathlib.Path(args.readme)
    text = readme.read_text()
    if BEGIN not in text or END not in text:
        sys.exit(f"{readme}: markers {BEGIN} / {END} not found")
    start, end = text.index(BEGIN), text.index(END) + len(END)
    current, wanted = text[start:end], table()
    if args.check:
        if current != wanted:
            sys.stdout.writelines(difflib.unified_diff(
                current.splitlines(True), wanted.splitlines(True), "README.md", "ops.def"))
            print("\nREADME.md's operator table differs from kernels/ops.def: "
                  "run tools/gen_op_table.py")
            return 1
        print(f"operator table matches kernels/ops.def ({len(rows())} operators)")
        return 0
    readme.write_text(text[:start] + wanted + text[end:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
