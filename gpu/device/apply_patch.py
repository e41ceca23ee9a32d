"""Apply a unified diff to a site-packages tree, strictly (every context and removed line must match
exactly, or nothing is written). A file the diff creates (`--- /dev/null`, `@@ -0,0 ...`: a plugin's
own package and dist-info) is written with its folders. Stdlib only: the GPU image has no `patch` we can count on.

    python apply_patch.py SITE_DIR PATCH.diff
"""
import re
import sys
from pathlib import Path

HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def parse(text: str):
    files, cur, hunk = [], None, None
    for line in text.splitlines():
        if line.startswith("+++ "):
            cur = {"path": line[4:].split("\t")[0].split("/", 1)[1], "hunks": []}
            files.append(cur)
        elif line.startswith("--- "):
            continue
        elif (m := HUNK.match(line)):
            hunk = {"start": int(m.group(1)), "lines": []}
            cur["hunks"].append(hunk)
        elif hunk is not None and line[:1] in (" ", "+", "-"):
            hunk["lines"].append(line)
        elif hunk is not None and line == "":
            hunk["lines"].append(" ")
    return files


def apply(site: Path, diff: Path) -> None:
    for f in parse(diff.read_text()):
        path = site / f["path"]
        creates = [h["start"] for h in f["hunks"]] == [0]
        if creates and path.exists():
            sys.exit(f"apply_patch: {f['path']}: the patch creates it, and it is already there")
        old = [] if creates else path.read_text().splitlines(keepends=True)
        out, pos = [], 0
        for h in f["hunks"]:
            start = max(h["start"] - 1, 0)
            out += old[pos:start]
            pos = start
            for line in h["lines"]:
                tag, body = line[0], line[1:]
                if tag in " -":
                    if old[pos].rstrip("\n") != body:
                        sys.exit(f"apply_patch: {f['path']}:{pos + 1} does not match the patch: {old[pos]!r}")
                    pos += 1
                if tag in " +":
                    out.append(body + "\n")
        out += old[pos:]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(out))
        print(f"apply_patch: patched {path} ({len(f['hunks'])} hunks)", flush=True)


if __name__ == "__main__":
    apply(Path(sys.argv[1]), Path(sys.argv[2]))
