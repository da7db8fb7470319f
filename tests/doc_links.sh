#!/bin/bash
# tests/doc_links.sh - make check: every relative link of README.md and
# doc/*.md, [text](path) or [text](path#anchor), names a file of the
# repository, and its anchor a heading of that file (GitHub's slugs: lower
# case, punctuation dropped, blanks to dashes). Links to other sites are not
# followed. Fails naming each broken link.
set -euo pipefail
src=${CHAOS_SRCDIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
cd "$src"
exec python3 - README.md doc/*.md <<'PY'
import os, re, sys

def slugs(path):
    out, fence = set(), False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            fence = not fence
        if fence or not line.startswith("#"):
            continue
        title = line.lstrip("#").strip()
        title = re.sub(r"[`*]", "", title).lower()
        title = re.sub(r"[^\w\- ]", "", title)
        out.add(title.replace(" ", "-"))
    return out

bad = links = 0
for doc in sys.argv[1:]:
    text, fence = [], False
    for line in open(doc, encoding="utf-8"):
        if line.startswith("```"):
            fence = not fence
        text.append("" if fence else line)
    for n, line in enumerate(text, 1):
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if re.match(r"[a-z]+:", target):
                continue
            links += 1
            path, _, anchor = target.partition("#")
            file = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
            if not os.path.exists(file):
                print(f"doc_links: {doc}:{n}: {target}: no file {file}", file=sys.stderr)
                bad += 1
            elif anchor and file.endswith(".md") and anchor not in slugs(file):
                print(f"doc_links: {doc}:{n}: {target}: no heading #{anchor} in {file}", file=sys.stderr)
                bad += 1
print(f"doc_links: {links} relative links in {len(sys.argv) - 1} files, {bad} broken")
sys.exit(1 if bad else 0)
PY
