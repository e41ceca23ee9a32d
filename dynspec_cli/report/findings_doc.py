"""docs/findings.md, generated from configs/findings.toml: the same registry `dynspec explain`
prints, so the page and the command cannot drift (tests/docs/test_findings_doc.py regenerates it and
compares). Regenerate after editing configs/findings.toml:

    python3 -m dynspec_cli.report.findings_doc > docs/findings.md
"""
from __future__ import annotations

import sys

from dynspec_cli.knowledge.findings import registry

COMMAND = "python3 -m dynspec_cli.report.findings_doc > docs/findings.md"

# What each family of codes is about (the hundreds digit); a family not named here is listed as "other".
FAMILIES = {
    "1": "configuration (flags, environment, effective settings)",
    "2": "code path (which worker runs, where the patch is, plugins)",
    "3": "runtime (what the log and the probe show the server did)",
    "4": "several hosts (a group's nodes)",
    "5": "Slurm batch scripts (`dynspec preflight --sbatch`)",
    "6": "vLLM and its plugins",
    "7": "a guarded benchmark run (`dynspec guard`)",
}

# The contexts of a finding's `verdict` policy, as a reader knows them.
CONTEXTS = {
    "log": "verify, launch, watch",
    "preflight": "preflight",
    "group": "a group's nodes",
    "guard": "guard",
}


def _cell(text: str) -> str:
    return text.replace("|", "/")


def page() -> str:
    reg = registry()
    out = [
        "# Findings",
        "",
        f"<!-- generated from configs/findings.toml by `{COMMAND}`; do not edit by hand -->",
        "",
        "Every finding dynspec reports has a stable code, a kebab-case name and a severity: `error` (the patch",
        "cannot be or was not live), `warning` (may silently change the result), `info` (context).",
        "`dynspec explain CODE` prints the same text as this page; `dynspec explain` lists them all.",
        "",
    ]
    present = sorted({c[2] for c in reg})
    out += [" · ".join(f"DS{d}xx {FAMILIES.get(d, 'other').split(' (')[0]}" for d in present), ""]
    # the table in code order, each code linking to its section (GitHub's heading anchors)
    out += ["| code | name | severity | what |", "|---|---|---|---|"]
    out += [f"| [{c}](#{c.lower()}-{reg[c].name}) | {reg[c].name} | {reg[c].severity} | {_cell(reg[c].what)} |"
            for c in sorted(reg)]
    out.append("")
    for d in present:
        out += [f"## DS{d}xx: {FAMILIES.get(d, 'other')}", ""]
        for code in sorted(c for c in reg if c[2] == d):
            f = reg[code]
            out += [f"### {code} {f.name}", "", f"Severity: {f.severity}.", "",
                    f"**What it does.** {f.what}", "", f"**Why this matters.** {f.why}", "",
                    f"**How to fix.** {f.fix}", ""]
            if f.verdict:
                effects = "; ".join(f"{CONTEXTS.get(k, k)}: `{v}`" for k, v in f.verdict.items())
                out += [f"**Effect on the verdict.** {effects}.", ""]
    return "\n".join(out).rstrip("\n") + "\n"


def main() -> int:
    sys.stdout.write(page())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
