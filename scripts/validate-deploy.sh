#!/usr/bin/env bash
# Validates deploy/ offline: YAML style (yamllint, deploy/.yamllint), the Prometheus
# configuration and alert rules (promtool check config / check rules / test rules), the
# Grafana dashboard's JSON, a few invariants of the Kubernetes Deployment, and that
# every metric the dashboard, the alert rules, their tests and the prometheus-adapter
# rules name is one ndserved exports, with labels it carries.
#
#   scripts/validate-deploy.sh [METRICS_TEXT]
#
# METRICS_TEXT: a /metrics page captured from a running daemon (best: after some
# traffic, so that every family has series), e.g.
#   curl -s localhost:8002/metrics > /tmp/metrics.txt
# Without it the families come from deploy/metric-families.txt (docs/design.md §7).
# Exit status 0 when everything passes. Needs yamllint, promtool and Debian's python3
# with PyYAML (scripts/install-deps.sh installs them).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

METRICS_TEXT=${1:-}
PY=/usr/bin/python3
[[ -x $PY ]] || PY=python3
failed=()

step() {
  local name=$1
  shift
  echo "== $name"
  if "$@"; then
    echo "   ok"
  else
    failed+=("$name")
  fi
}

need() {
  command -v "$1" >/dev/null 2>&1 || { echo "validate-deploy: $1 not found (scripts/install-deps.sh)" >&2; exit 2; }
}
need yamllint
need promtool
$PY -c 'import yaml' 2>/dev/null || { echo "validate-deploy: $PY lacks PyYAML" >&2; exit 2; }
if [[ -n $METRICS_TEXT && ! -r $METRICS_TEXT ]]; then
  echo "validate-deploy: cannot read $METRICS_TEXT" >&2
  exit 2
fi

step "yamllint deploy/" yamllint -c deploy/.yamllint deploy
# check config also checks the rule files it names.
step "promtool check config" promtool check config deploy/prometheus/prometheus.yml
step "promtool check rules" promtool check rules deploy/prometheus/alerts.yml
step "promtool test rules" promtool test rules deploy/prometheus/alerts_test.yml
step "Deployment invariants and metric names" "$PY" - "$METRICS_TEXT" <<'EOF'
import json
import re
import sys

import yaml

metrics_text = sys.argv[1]
errors = []

# --- The dashboard is JSON Grafana can import. ------------------------------------
DASHBOARD = "deploy/grafana/ndserve-dashboard.json"
try:
    with open(DASHBOARD) as f:
        dashboard = json.load(f)
except ValueError as e:
    print(f"   {DASHBOARD}: not JSON: {e}")
    sys.exit(1)
for key in ("title", "uid", "panels", "templating"):
    if key not in dashboard:
        errors.append(f"{DASHBOARD}: no '{key}'")

# --- Known sample names and their labels. -----------------------------------------
# Labels Prometheus or the scrape adds to every series.
TARGET_LABELS = {"instance", "job", "namespace", "pod", "service", "container", "endpoint",
                 "environment"}
samples = {}  # sample name -> allowed label names
if metrics_text:
    source = metrics_text
    types = {}
    with open(metrics_text) as f:
        for line in f:
            line = line.strip()
            if line.startswith("# TYPE "):
                _, _, name, kind = line.split(None, 3)
                types[name] = kind
                continue
            if not line or line.startswith("#"):
                continue
            m = re.match(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?', line)
            labels = set(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', m.group(3) or ""))
            samples.setdefault(m.group(1), set()).update(labels)
    # A family announced but without series yet still has a known shape.
    for name, kind in types.items():
        if kind == "histogram":
            for s in ("_bucket", "_sum", "_count"):
                samples.setdefault(name + s, set())
        elif kind == "summary":
            for s in ("", "_sum", "_count"):
                samples.setdefault(name + s, set())
        else:
            samples.setdefault(name, set())
    with open("deploy/metric-families.txt") as f:
        listed = [l.split()[0] for l in f if l.strip() and not l.startswith("#")]
    for name in listed:
        if name not in types and name not in samples:
            print(f"   note: {name} (deploy/metric-families.txt) is not in {metrics_text}")
else:
    source = "deploy/metric-families.txt"
    with open(source) as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            name, kind, labels = line.split()
            labels = set() if labels == "-" else set(labels.split(","))
            if kind == "histogram":
                samples[name + "_bucket"] = labels | {"le"}
                samples[name + "_sum"] = labels
                samples[name + "_count"] = labels
            else:
                samples[name] = labels
# Series Prometheus makes itself.
SYNTHETIC = {"up", "scrape_duration_seconds", "scrape_samples_scraped"}

# --- PromQL: the metric names and matcher labels an expression uses. --------------
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool",
            "and", "or", "unless", "atan2", "inf", "nan"}

def selectors(expr):
    """(metric name, [matcher label names]) of every vector selector in expr."""
    e = re.sub(r"<<[^>]*>>", "", expr)                       # prometheus-adapter templates
    e = re.sub(r'"(\\.|[^"\\])*"|\'(\\.|[^\'\\])*\'', '""', e)  # string literals
    found = []
    # Selectors with matchers: name{...} or bare {...}.
    def keep_matchers(m):
        found.append((m.group(1), re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)',
                                             m.group(2))))
        return " "
    e = re.sub(r'([a-zA-Z_:][a-zA-Z0-9_:]*)?\s*\{([^}]*)\}', keep_matchers, e)
    e = re.sub(r"\[[^\]]*\]", " ", e)                        # ranges, subqueries
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    e = re.sub(r"\b\d+(\.\d+)?([eE][+-]?\d+)?[a-zA-Z]*", " ", e)  # numbers, durations
    for m in re.finditer(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?", e):
        name, call = m.group(1), m.group(2)
        if call or name in KEYWORDS:
            continue
        found.append((name, []))
    return [(n, l) for n, l in found if n]

recorded = set()
checked = []  # (where, expr)

def add(where, expr):
    if isinstance(expr, str) and expr.strip():
        checked.append((where, expr))

with open("deploy/prometheus/alerts.yml") as f:
    for group in yaml.safe_load(f)["groups"]:
        for rule in group["rules"]:
            if "record" in rule:
                recorded.add(rule["record"])
            add(f"alerts.yml {rule.get('alert') or rule.get('record')}", rule["expr"])

with open("deploy/prometheus/alerts_test.yml") as f:
    for i, test in enumerate(yaml.safe_load(f)["tests"]):
        for series in test.get("input_series", []):
            add(f"alerts_test.yml test {i + 1} input", series["series"])
        for t in test.get("promql_expr_test", []):
            add(f"alerts_test.yml test {i + 1} expr", t["expr"])

def walk(panels):
    for p in panels:
        for t in p.get("targets", []):
            add(f"dashboard panel '{p.get('title')}'", t.get("expr"))
        walk(p.get("panels", []))
walk(dashboard.get("panels", []))
for v in dashboard.get("templating", {}).get("list", []):
    if v.get("type") != "query":
        continue
    q = v["query"]["query"] if isinstance(v.get("query"), dict) else v.get("query", "")
    m = re.match(r"\s*label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$", q)
    m = m or re.match(r"\s*(?:label_values|query_result)\((.*)\)\s*$", q)
    add(f"dashboard variable ${v['name']}", m.group(1) if m else q)

with open("deploy/k8s/prometheus-adapter-rules.yaml") as f:
    adapter = yaml.safe_load(yaml.safe_load(f)["data"]["config.yaml"])
for r in adapter["rules"]:
    add(f"prometheus-adapter rule {r['name']['as']}", r["seriesQuery"])
    add(f"prometheus-adapter rule {r['name']['as']}", r["metricsQuery"])

names_used = set()
for where, expr in checked:
    for name, labels in selectors(expr):
        names_used.add(name)
        if name in recorded or name in SYNTHETIC:
            continue
        if name not in samples:
            errors.append(f"{where}: metric '{name}' is not exported (per {source})")
            continue
        allowed = samples[name] | TARGET_LABELS | {"__name__"}
        if name.endswith("_bucket"):
            allowed |= {"le"}
        for label in labels:
            # With a capture, a label the capture lacks may still be legitimate (a series
            # not created yet), so only the family list is strict about labels.
            if label not in allowed and not metrics_text:
                errors.append(f"{where}: metric '{name}' has no label '{label}'")

# --- Kubernetes Deployment invariants. --------------------------------------------
with open("deploy/k8s/deployment.yaml") as f:
    deployment = yaml.safe_load(f)
spec = deployment["spec"]["template"]["spec"]
container = spec["containers"][0]
args = container.get("args", [])
def flag(name):
    for a in args:
        if a.startswith(f"--{name}="):
            return a.split("=", 1)[1]
    return None
exit_timeout = int(flag("exit_timeout_seconds") or 30)
pre_stop = 0
cmd = container.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
if len(cmd) == 2 and cmd[0] == "sleep":
    pre_stop = int(cmd[1])
grace = spec.get("terminationGracePeriodSeconds", 30)
if grace <= exit_timeout + pre_stop:
    errors.append(f"deployment.yaml: terminationGracePeriodSeconds {grace} must exceed "
                  f"preStop {pre_stop} s + --exit_timeout_seconds {exit_timeout}")
if container["resources"]["limits"].get("nvidia.com/gpu") != 1:
    errors.append("deployment.yaml: limits must ask for nvidia.com/gpu: 1")
for probe, service in (("livenessProbe", "liveness"), ("readinessProbe", "readiness"),
                       ("startupProbe", None)):
    g = container.get(probe, {}).get("grpc")
    if not g or g.get("port") != 8001 or (service and g.get("service") != service):
        errors.append(f"deployment.yaml: {probe} must be a gRPC probe on 8001"
                      + (f" for service '{service}'" if service else ""))
token_file = flag("admin_token_file")
mounts = {m["mountPath"] for m in container.get("volumeMounts", [])}
if not token_file or not any(token_file.startswith(m.rstrip("/") + "/") for m in mounts):
    errors.append("deployment.yaml: --admin_token_file must point into a mounted volume")
env = {e["name"] for e in container.get("env", [])}
for name in ("NDSERVE_MEMORY_POOL", "NDSERVE_MEMORY_LIMIT"):
    if name not in env:
        errors.append(f"deployment.yaml: no {name} in env")

print(f"   {len(checked)} expressions, {len(names_used)} metric names checked against {source}")
for e in dict.fromkeys(errors):
    print(f"   FAIL {e}")
if errors and metrics_text:
    print("   (a family exported only once it has series, e.g. per model or per request, is "
          "missing from a capture taken before any traffic)")
sys.exit(1 if errors else 0)
EOF

if ((${#failed[@]})); then
  echo "validate-deploy: FAILED: ${failed[*]}"
  exit 1
fi
echo "validate-deploy: all checks passed"
