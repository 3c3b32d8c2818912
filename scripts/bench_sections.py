"""The marked sections of BENCHMARKS.md that each benchmark script owns: the text between
"<!-- BEGIN name -->" and "<!-- END name -->". A script replaces only its own section, so
reports written by different scripts (and runs) live in one file. Stdlib only.
"""
import os
from pathlib import Path

# Sections written by scripts other than bench-vs-redis.sh, in the order they appear.
OWNED = (
    "fabric",       # scripts/bench-fabric.sh
    "replication",  # scripts/bench-replication.sh
    "failover",     # scripts/bench-failover.sh
)


def markers(name: str) -> tuple:
    return f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"


def section(text: str, name: str) -> str:
    """The section `name` of `text`, markers included; "" when there is none."""
    begin, end = markers(name)
    start = text.find(begin)
    stop = text.find(end, start)
    if start < 0 or stop < 0:
        return ""
    return text[start:stop + len(end)]


def replace(path: Path, name: str, body: str) -> None:
    """Writes `body` (which starts and ends with the section's markers) over the section
    `name` of the file at `path`, or appends it when the file has none; atomically."""
    old = path.read_text() if path.exists() else ""
    current = section(old, name)
    if current:
        new = old.replace(current, body, 1)
    else:
        new = old.rstrip("\n") + "\n\n" + body + "\n"
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(new)
    os.replace(tmp, path)  # never leave a half-written report
