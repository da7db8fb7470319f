#!/usr/bin/env python3
# tests/grafana_check.py SRCDIR [SCRAPE] - run by tests/grafana_check.sh:
# every metric and label that etc/grafana/ferry.json's queries and
# etc/prometheus/ferry-alerts.yml's expressions name is one ferryd exports
# (read from src/ferryd/metrics_text.c, where each family is written), the JSON
# parses into a dashboard with its variables and a query in every panel,
# and every alert has its summary, description and runbook. With SCRAPE (a
# real ferryd's /metrics, from tests/integration/test_metrics), the names
# and labels are those of the scrape, and they must also be the source's.
# Fails naming each panel or alert and what is wrong.
import json
import re
import sys

src = sys.argv[1] if len(sys.argv) > 1 else "."
problems = []

# What Prometheus adds to every series it scrapes.
SCRAPE_METRICS = {"up"}
SCRAPE_LABELS = {"instance", "job"}
KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on",
            "ignoring", "group_left", "group_right", "inf", "nan"}


def exported():
    """Metric names and labels written by src/ferryd/metrics_text.c: its string
    literals ferry_..., or their _bucket, _sum and _count in a function that
    says "histogram"; labels are the name= inside {...}."""
    text = open(src + "/src/ferryd/metrics_text.c").read()
    names = set()
    for chunk in text.split("\n}\n"):
        found = set(re.findall(r'"(ferry_[a-z0-9_]+)', chunk))
        if '"histogram"' in chunk:
            found = {n + s for n in found for s in ("_bucket", "_sum", "_count")}
        names |= found
    labels = set(re.findall(r'[{,"]([a-z_]+)=\\"', text))
    return names, labels


def scraped(path):
    """Metric names (of the # TYPE lines: every family is typed, even one
    without a series yet) and labels of a Prometheus text exposition."""
    names, labels = set(), set()
    for line in open(path):
        m = re.match(r"# TYPE (\S+) (\S+)", line)
        if m and m.group(2) == "histogram":
            names |= {m.group(1) + s for s in ("_bucket", "_sum", "_count")}
        elif m:
            names.add(m.group(1))
        elif not line.startswith("#"):
            labels |= set(re.findall(r'[{,]([a-zA-Z_][a-zA-Z0-9_]*)="', line))
    return names, labels


def strip(expr, labels_used):
    """expr without its strings, selectors, ranges and label lists; the label
    names found in them go to labels_used."""
    e = re.sub(r'"(?:\\.|[^"\\])*"', '""', expr)
    for inner in re.findall(r"\{([^}]*)\}", e):
        labels_used |= set(re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)", inner))
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    for inner in re.findall(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)", e):
        labels_used |= set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", inner))
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    return re.sub(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?", " ", e)


def check_expr(expr, what, names, labels):
    """Every metric (an identifier not called as a function, not a keyword)
    and label of one PromQL expression exists; at least one metric."""
    used_labels = set()
    m = re.fullmatch(r"\s*label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*", expr)
    if m:
        expr, used_labels = m.group(1), {m.group(2)}
    e = strip(expr, used_labels)
    metrics = set()
    for t in re.finditer(r"(?<![A-Za-z0-9_.])([A-Za-z_:][A-Za-z0-9_:]*)(\s*\()?", e):
        if t.group(2) is None and t.group(1) not in KEYWORDS:
            metrics.add(t.group(1))
    if not metrics:
        problems.append(f"{what}: no metric in {expr!r}")
    for n in sorted(metrics - names - SCRAPE_METRICS):
        problems.append(f"{what}: ferryd exports no metric {n}")
    for label in sorted(used_labels - labels - SCRAPE_LABELS):
        problems.append(f"{what}: ferryd exports no label {label}")
    return metrics


def check_dashboard(names, labels):
    path = src + "/etc/grafana/ferry.json"
    try:
        d = json.load(open(path))
    except ValueError as err:
        problems.append(f"{path}: not JSON: {err}")
        return set()
    used = set()
    if not 36 <= d.get("schemaVersion", 0) <= 41:
        problems.append(f"{path}: schemaVersion {d.get('schemaVersion')}, not ~39")
    variables = {v["name"]: v for v in d.get("templating", {}).get("list", [])}
    if variables.get("DS_PROMETHEUS", {}).get("type") != "datasource":
        problems.append(f"{path}: no datasource variable DS_PROMETHEUS")
    for v in ("queue", "instance"):
        if v not in variables:
            problems.append(f"{path}: no template variable {v}")
        else:
            q = variables[v]["query"]
            used |= check_expr(q["query"] if isinstance(q, dict) else q,
                               f"variable {v}", names, labels)
    panels = []
    for p in d.get("panels", []):
        panels += [p] + p.get("panels", [])
    for p in panels:
        if p.get("type") == "row":
            continue
        what = f"panel {p.get('title')!r}"
        if p.get("datasource", {}).get("uid") != "${DS_PROMETHEUS}":
            problems.append(f"{what}: datasource is not ${{DS_PROMETHEUS}}")
        if not p.get("targets"):
            problems.append(f"{what}: no query")
        for t in p.get("targets", []):
            used |= check_expr(t.get("expr", ""), what, names, labels)
            if "$queue" not in t.get("expr", "") and "$instance" not in t.get("expr", ""):
                problems.append(f"{what}: query {t.get('expr')!r} ignores $queue and $instance")
    return used


def check_rules(names, labels):
    """The rules file read line by line (its own layout: `- alert:` starts a
    rule, `expr:` is one line or a `|` block indented under it)."""
    path = src + "/etc/prometheus/ferry-alerts.yml"
    rules, cur, block = [], None, None
    for line in open(path):
        indent = len(line) - len(line.lstrip())
        if block is not None:
            if line.strip() and indent <= block:
                block = None
            else:
                cur["expr"] += line
                continue
        m = re.match(r"\s*- alert:\s*(\S+)", line)
        if m:
            cur = {"name": m.group(1), "expr": "", "keys": set()}
            rules.append(cur)
            continue
        m = re.match(r"\s*([a-z_]+):\s*(.*)", line)
        if cur is not None and m:
            cur["keys"].add(m.group(1))
            if m.group(1) == "expr":
                if m.group(2).strip() == "|":
                    block = indent
                else:
                    cur["expr"] = m.group(2)
    if len(rules) < 6:
        problems.append(f"{path}: {len(rules)} alerts, expected at least 6")
    used = set()
    for r in rules:
        for key in ("expr", "summary", "description", "runbook", "severity"):
            if key not in r["keys"]:
                problems.append(f"alert {r['name']}: no {key}")
        used |= check_expr(r["expr"], f"alert {r['name']}", names, labels)
    return used


names, labels = exported()
if len(names) < 20 or "queue" not in labels:
    problems.append(f"src/ferryd/metrics_text.c: read only {len(names)} metrics, labels {sorted(labels)}")
if len(sys.argv) > 2:
    s_names, s_labels = scraped(sys.argv[2])
    for n in sorted(names ^ s_names):
        problems.append(f"{n}: in {'src/ferryd/metrics_text.c' if n in names else sys.argv[2]} only")
    for n in sorted(labels ^ s_labels):
        problems.append(f"label {n}: in {'src/ferryd/metrics_text.c' if n in labels else sys.argv[2]} only")
    names, labels = s_names, s_labels
used = check_dashboard(names, labels) | check_rules(names, labels)
for p in problems:
    print("grafana_check: " + p, file=sys.stderr)
if problems:
    sys.exit(1)
print(f"grafana_check: the dashboard and rules use {len(used & names)} of the "
      f"{len(names)} metrics ferryd exports, and no other but {sorted(SCRAPE_METRICS)}")
