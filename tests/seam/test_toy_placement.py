"""The placement seam (issue 30): a toy placement, added as one folder and one registry line to a
copy of dynspec, launches the GPU-server stand-in through the real command line, is listed by
`status`, stopped by `stop` (nothing of it left running), and its log judged by `verify`. What the
copy changed is exactly the new folder plus one added line: what a Kubernetes placement would touch."""
from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from tests.run.helpers import group_alive, write_profile
from tests.support.seam import changed, run, with_member

TOY = Path(__file__).resolve().parent / "toy_placement"
LINE = '"toy": "dynspec_cli.place.toy",'


def test_a_toy_placement_is_one_folder_and_one_registry_line(tmp_path):
    dest = with_member(tmp_path / "copy", TOY, "place/toy", "place/__init__.py", "KINDS", LINE)
    prof = write_profile(tmp_path / "toy.toml", "toyrun", env={"SGLANG_ENABLE_SPEC_V2": "True"})
    prof.write_text('scheduler = "toy"\n' + prof.read_text())
    log = tmp_path / "toyrun.log"
    pgid = None
    try:
        r = run(dest, "launch", str(prof), "--json", "--timeout", "90", timeout=150)
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["verdict"] == "live" and doc["run"]["why"] == "ready", doc
        assert doc["run"]["health"].endswith(" 200")
        rec = json.loads((Path(os.environ["DYNSPEC_HOME"]) / "toy" / "toyrun.json").read_text())
        pgid = rec["pgid"]
        assert group_alive(pgid)  # started by the toy's own runner, left running live
        assert not (Path(os.environ["DYNSPEC_HOME"]) / "runs" / "toyrun.json").exists()  # not a host run

        st = run(dest, "status", "toyrun", "--json")
        assert st.returncode == 0, st.stderr
        rows = json.loads(st.stdout)["runs"]
        assert [(x["name"], x["alive"], x.get("placement")) for x in rows] == [("toyrun", True, "toy")]

        v = run(dest, "verify", str(log), "--json")
        assert v.returncode == 0, v.stdout + v.stderr
        assert json.loads(v.stdout)["verdict"] == "live"

        s = run(dest, "stop", "toyrun")
        assert s.returncode == 0 and "no process remains" in s.stdout, s.stdout + s.stderr
        assert not group_alive(pgid)  # nothing of it left running
        after = json.loads(run(dest, "status", "toyrun", "--json").stdout)["runs"]
        assert [x["alive"] for x in after] == [False]
    finally:
        if pgid and group_alive(pgid):
            os.killpg(pgid, signal.SIGKILL)

    diff = changed(dest)
    toy_files = sorted(f"dynspec_cli/place/toy/{p.relative_to(TOY)}" for p in TOY.rglob("*.py"))
    assert sorted(diff["added"]) == toy_files
    assert diff["edited"] == {"dynspec_cli/place/__init__.py": (1, 0)}
    print(f"\nthe toy placement: {len(diff['added'])} new files in one folder (dynspec_cli/place/toy/) "
          f"+ 1 added line in dynspec_cli/place/__init__.py; nothing else changed")
