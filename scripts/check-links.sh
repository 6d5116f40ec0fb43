#!/usr/bin/env bash
# Checks the relative links of the Markdown documentation: every link's target
# file exists, and every #anchor names a heading of its target (GitHub's
# anchors: the heading's text lowercased, punctuation dropped, spaces turned
# into '-', "-1", "-2"... for repeats; Doxygen's {#id} counts too).
#
#   check-links.sh [FILE.md...]    default: README.md and docs/*.md
#
# Links inside code (fenced blocks and `spans`) and to other sites (a scheme
# such as https:, mailto:) are not checked. Prints each broken link as
# FILE:LINE: TARGET: why, and exits 1 when there is one.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
if (($# == 0)); then
  set -- README.md docs/*.md
fi

exec python3 - "$@" <<'EOF'
import os
import re
import sys

FENCE = re.compile(r"^ {0,3}(```|~~~)")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
# [text](target) and ![alt](target); the text may hold one level of [brackets].
INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
EXPLICIT_ID = re.compile(r"\{#([A-Za-z0-9_.:-]+)\}")
HTML_ID = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")


def prose_lines(path):
    """(line number, text) of each line outside fenced code blocks."""
    fence = None
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n")
            m = FENCE.match(line)
            if fence is None and m:
                fence = m.group(1)
                continue
            if fence is not None:
                if line.strip().startswith(fence):
                    fence = None
                continue
            yield number, line


def slug(text):
    text = CODE_SPAN.sub(lambda m: m.group(0).strip("`"), text)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading: its text
    text = EXPLICIT_ID.sub("", text)
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML tags
    text = text.strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


anchor_cache = {}


def anchors(path):
    if path not in anchor_cache:
        found, seen, previous = set(), {}, None
        for _, line in prose_lines(path):
            titles = []
            m = HEADING.match(line)
            if m:
                titles.append(m.group(2))
            elif previous and previous.strip() and SETEXT.match(line) and not HEADING.match(previous):
                titles.append(previous.strip())
            for title in titles:
                found.update(EXPLICIT_ID.findall(title))
                base = slug(title)
                n = seen.get(base, 0)
                seen[base] = n + 1
                found.add(base if n == 0 else f"{base}-{n}")
            found.update(HTML_ID.findall(line))
            previous = line
        anchor_cache[path] = found
    return anchor_cache[path]


broken = 0
checked = 0
for source in sys.argv[1:]:
    if not os.path.isfile(source):
        print(f"{source}: no such file", file=sys.stderr)
        broken += 1
        continue
    for number, line in prose_lines(source):
        prose = CODE_SPAN.sub("", line)
        targets = INLINE.findall(prose)
        m = REFERENCE.match(prose)
        if m:
            targets.append(m.group(1))
        for target in targets:
            if not target or re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", target):
                continue  # another site (https:, mailto:, ...)
            checked += 1
            path, _, anchor = target.partition("#")
            resolved = os.path.normpath(os.path.join(os.path.dirname(source), path)) if path else source
            why = None
            if not os.path.exists(resolved):
                why = f"no file {resolved}"
            elif anchor:
                if os.path.isdir(resolved) or not resolved.endswith(".md"):
                    why = f"an anchor into {resolved}, which is not a Markdown file"
                elif anchor not in anchors(resolved):
                    why = f"no heading #{anchor} in {resolved}"
            if why:
                print(f"{source}:{number}: {target}: {why}")
                broken += 1

print(f"check-links: {checked} links checked, {broken} broken", file=sys.stderr)
sys.exit(1 if broken else 0)
EOF
