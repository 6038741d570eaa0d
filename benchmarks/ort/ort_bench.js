#!/usr/bin/env node
// ONNX Runtime on one model and one input set, in-process on the CPU, as the peer that
// scripts/models-bench.sh sets ndserve's models_benchmark against. Reads the inputs from a
// case folder in the case.txt grammar (tools/gen_models.py), so both programs run the same
// model file on the same bytes.
//
//   node ort_bench.js --model M.onnx --case DIR [--batch N] [--seconds 5] [--threads 2]
//       runs M back to back for the given seconds after a warm-up; prints one JSON line:
//       {"model", "case", "batch", "runs", "seconds", "rows_per_s", "ms_per_run"}
//   node ort_bench.js --model M.onnx --case DIR --verify
//       one run, every output compared with the case's reference (output_tolerance lines,
//       else the case's tolerance); prints {"ok", "outputs": [{name, worst_abs_diff, bad}]}
//       and exits 1 on a mismatch. A check that the fixtures mean what they say.
//
//   node ort_bench.js --model M.onnx --case DIR [--batch N] --profile RUNS [--nodes 25]
//       ORT's own profiler (enableProfiling) over RUNS runs after as many warm-up ones:
//       prints markdown tables of time per run by op kind and the slowest nodes, to set
//       beside models_benchmark --profile's for the same row.
//
// --batch N resizes every input to N rows along dimension 0: the case's rows repeated in
// order, or its first N (as models_benchmark --row=...,N does); by default the case's own
// batch. rows/s = runs * batch / seconds.
'use strict';

const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

function parseArgs(argv) {
  const args = {seconds: 5, threads: 2, verify: false};
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    if (a === '--verify') {
      args.verify = true;
    } else if (a.startsWith('--') && i + 1 < argv.length) {
      args[a.slice(2)] = argv[++i];
    } else {
      throw new Error(`unexpected argument ${a}`);
    }
  }
  if (!args.model || !args.case) throw new Error('need --model and --case');
  args.seconds = Number(args.seconds);
  args.threads = Number(args.threads);
  return args;
}

const TYPES = {
  FP32: ['float32', Float32Array],
  FP64: ['float64', Float64Array],
  INT64: ['int64', BigInt64Array],
  INT32: ['int32', Int32Array],
  BOOL: ['bool', Uint8Array],
};

function readTensor(dir, dtype, dimsText, file) {
  const dims = dimsText.replace(/[[\]]/g, '').split(',').filter((d) => d !== '').map(Number);
  const [type, Ctor] = TYPES[dtype] || [];
  if (!type) throw new Error(`unsupported dtype ${dtype}`);
  const bytes = fs.readFileSync(path.join(dir, file));
  // Copy into an aligned buffer: Node's Buffer may sit at any offset of its pool.
  const aligned = new ArrayBuffer(bytes.length);
  new Uint8Array(aligned).set(bytes);
  return new ort.Tensor(type, new Ctor(aligned), dims);
}

// The tensor with `batch` rows: rows of `t` repeated in order (or its first ones).
function resizeBatch(t, batch) {
  const rows = t.dims[0];
  const row = t.data.length / rows;
  const data = new t.data.constructor(row * batch);
  for (let r = 0; r < batch; ++r) {
    data.set(t.data.subarray((r % rows) * row, (r % rows + 1) * row), r * row);
  }
  return new ort.Tensor(t.type, data, [batch, ...t.dims.slice(1)]);
}

function readCase(dir) {
  const c = {inputs: {}, inputOrder: [], outputs: {}, tolerance: {}, atol: 0, rtol: 0};
  for (const raw of fs.readFileSync(path.join(dir, 'case.txt'), 'utf8').split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const w = line.split(/\s+/);
    if (w[0] === 'input' && w.length === 5) {
      c.inputs[w[1]] = readTensor(dir, w[2], w[3], w[4]);
      c.inputOrder.push(w[1]);
    } else if (w[0] === 'output' && w.length === 5) {
      c.outputs[w[1]] = readTensor(dir, w[2], w[3], w[4]);
    } else if (w[0] === 'output_tolerance' && w.length === 4) {
      c.tolerance[w[1]] = {atol: Number(w[2]), rtol: Number(w[3])};
    } else if (w[0] === 'tolerance' && w.length === 3) {
      c.atol = Number(w[1]);
      c.rtol = Number(w[2]);
    }
  }
  return c;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const profileRuns = args.profile !== undefined ? Number(args.profile) : 0;
  const profileDir = profileRuns > 0 ? fs.mkdtempSync(path.join(require('os').tmpdir(), 'ortprof-')) : '';
  const session = await ort.InferenceSession.create(args.model, {
    intraOpNumThreads: args.threads,
    interOpNumThreads: 1,
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'all',
    ...(profileRuns > 0 ? {enableProfiling: true, profileFilePrefix: path.join(profileDir, 'ort')} : {}),
  });
  const c = readCase(args.case);
  if (args.batch !== undefined) {
    if (args.verify) throw new Error('--verify checks the case as it is; drop --batch');
    for (const name of c.inputOrder) c.inputs[name] = resizeBatch(c.inputs[name], Number(args.batch));
  }
  const batch = c.inputs[c.inputOrder[0]].dims[0];

  if (args.verify) {
    const got = await session.run(c.inputs);
    const report = [];
    let ok = true;
    for (const [name, want] of Object.entries(c.outputs)) {
      const g = got[name];
      const tol = c.tolerance[name] || {atol: c.atol, rtol: c.rtol};
      let worst = 0;
      let bad = 0;
      if (!g || g.data.length !== want.data.length) {
        bad = want.data.length;
      } else {
        for (let i = 0; i < g.data.length; ++i) {
          const d = Math.abs(Number(g.data[i]) - Number(want.data[i]));
          if (!(d <= tol.atol + tol.rtol * Math.abs(Number(want.data[i])))) ++bad;
          if (Number.isFinite(d)) worst = Math.max(worst, d);
        }
      }
      if (bad > 0) ok = false;
      report.push({name, worst_abs_diff: worst, bad, atol: tol.atol, rtol: tol.rtol});
    }
    console.log(JSON.stringify({model: args.model, case: args.case, ok, outputs: report}));
    process.exit(ok ? 0 : 1);
  }

  if (profileRuns > 0) {
    for (let i = 0; i < 2 * profileRuns; ++i) await session.run(c.inputs);
    session.endProfiling();
    const file = fs.readdirSync(profileDir).find((f) => f.startsWith('ort') && f.endsWith('.json'));
    if (!file) throw new Error(`no profile file in ${profileDir}`);
    const events = JSON.parse(fs.readFileSync(path.join(profileDir, file), 'utf8'));
    fs.rmSync(profileDir, {recursive: true, force: true});
    const nodes = args.nodes !== undefined ? Number(args.nodes) : 25;
    console.log(profileReport(events, profileRuns, batch, args.model, nodes));
    return;
  }

  // Warm-up: the first runs allocate and pick kernels.
  const warmupEnd = performance.now() + Math.min(1000, args.seconds * 200);
  do {
    await session.run(c.inputs);
  } while (performance.now() < warmupEnd);

  let runs = 0;
  const start = performance.now();
  const end = start + args.seconds * 1000;
  let now = start;
  while (now < end) {
    await session.run(c.inputs);
    ++runs;
    now = performance.now();
  }
  const seconds = (now - start) / 1000;
  console.log(JSON.stringify({
    model: args.model,
    case: args.case,
    batch,
    runs,
    seconds,
    rows_per_s: (runs * batch) / seconds,
    ms_per_run: (seconds * 1000) / runs,
  }));
}

// ORT's profile events of the last `runs` model runs, as markdown: per op kind and the
// `top` slowest nodes (kernel time, microseconds in the file).
function profileReport(events, runs, batch, model, top) {
  const modelRuns = events.filter((e) => e.cat === 'Session' && e.name === 'model_run')
      .sort((a, b) => a.ts - b.ts);
  if (modelRuns.length < runs) throw new Error(`profile has ${modelRuns.length} runs`);
  const timed = modelRuns.slice(modelRuns.length - runs);
  const from = timed[0].ts;
  const runUs = timed.reduce((s, e) => s + e.dur, 0);
  const kinds = new Map();
  const nodes = new Map();
  for (const e of events) {
    if (e.cat !== 'Node' || e.ts < from || !e.name.endsWith('_kernel_time')) continue;
    const op = e.args.op_name;
    const name = e.name.slice(0, -'_kernel_time'.length);
    const k = kinds.get(op) || {us: 0, nodes: new Set()};
    k.us += e.dur;
    k.nodes.add(name);
    kinds.set(op, k);
    const n = nodes.get(name) || {op, us: 0, shapes: JSON.stringify(e.args.output_type_shape || '')};
    n.us += e.dur;
    nodes.set(name, n);
  }
  const ms = (us) => (us / runs / 1000).toFixed(3);
  const pct = (us) => `${(100 * us / runUs).toFixed(1)} %`;
  const lines = [`## ORT ${path.basename(path.dirname(path.dirname(model)))} b${batch}`, '',
    `${runs} runs, ${ms(runUs)} ms per run`, '',
    '| op | nodes | ms per run | share |', '|---|---:|---:|---:|'];
  for (const [op, k] of [...kinds].sort((a, b) => b[1].us - a[1].us)) {
    lines.push(`| ${op} | ${k.nodes.size} | ${ms(k.us)} | ${pct(k.us)} |`);
  }
  lines.push('', '| node | op | output shapes | ms per run | share |', '|---|---|---|---:|---:|');
  for (const [name, n] of [...nodes].sort((a, b) => b[1].us - a[1].us).slice(0, top)) {
    lines.push(`| ${name} | ${n.op} | ${n.shapes.replace(/[|]/g, '/')} | ${ms(n.us)} | ${pct(n.us)} |`);
  }
  return lines.join('\n');
}

main().catch((e) => {
  console.error(`ort_bench: ${e.message}`);
  process.exit(2);
});
