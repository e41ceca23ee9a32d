"""The preflight inspector against real published sglang wheels, patched like a user patches them.
Each test runs the inspector as its own process (`python -c BOOTSTRAP`, program and JSON on stdin)."""
from __future__ import annotations

import difflib
import os
import py_compile
import re
import sys
import time
from pathlib import Path

import pytest

from dynspec_cli.engines.sglang.knowledge import knowledge
from tests.inject.conftest import (MARKER, PY38, PY310, PY312, VERSIONS, base_args, clean_env, file_entry, hits_in,
                                   rewrite, run_inspector)
from tests.support import sglang_patch

pytestmark = pytest.mark.wheels

WORKER = "sglang/srt/speculative/eagle_worker_v2.py"


def _flag_home(version: str) -> str:
    return "sglang/srt/arg_groups/fields/spec.py" if version == "0.5.23" else "sglang/srt/server_args.py"


# --------------------------------------------------------------------------------------------------
# the user's patch: marker in EAGLEWorkerV2.__init__, flag in ServerArgs


@pytest.mark.parametrize("version", VERSIONS)
def test_patched_release_marker_flag_and_files(site_copy, version):
    site = site_copy(version)
    rec = sglang_patch.patch_sglang(site)
    doc = run_inspector(base_args(site)).doc
    assert doc["ok"], doc["error"]

    sg = doc["sglang"]
    assert sg["version"] == version and sg["version_py"] == version and sg["dist_version"] == version
    assert sg["package_dir"] == str(site / "sglang")
    assert not sg["editable"] and not sg["multiple_installs"]

    (hit,) = doc["marker"]["hits"]
    assert hit["file"] == str(rec.marker_line.file)
    assert hit["line"] == rec.marker_line.line
    assert (hit["class"], hit["function"], hit["qualname"]) == ("EAGLEWorkerV2", "__init__", "EAGLEWorkerV2.__init__")
    assert hit["kind"] == "fstring" and hit["call"] == "logger.info" and hit["pattern_matches"] is True
    assert "{server_args.speculative_disable_batch_threshold}" in hit["template"]
    # the class's bases as written in the wheel agree with the knowledge table
    assert hit["bases"] == knowledge().class_row(version, "EAGLEWorkerV2").bases

    ff = doc["flags"]["feature_flag"]
    assert ff["defined"] and ff["accepted"]
    assert ff["defined_at"]["file"] == str(site / _flag_home(version))
    assert ff["defined_at"]["style"] == ("annotated-field" if version == "0.5.23" else "add_argument")

    changed = set(doc["sglang"]["modified_since_install"]["changed"])
    assert changed == {str(p) for p in rec.files}
    for path in rec.files:
        entry = file_entry(doc, path)
        assert entry["compiles"] is True and entry["syntax_error"] is None


@pytest.mark.parametrize("version", VERSIONS)
def test_unpatched_release_has_no_marker_and_rejects_the_flag(site_copy, version):
    site = site_copy(version)
    doc = run_inspector(base_args(site)).doc
    assert doc["ok"]
    assert doc["marker"]["hits"] == [] and doc["marker"]["files_scanned"] > 300
    ff = doc["flags"]["feature_flag"]
    assert (ff["defined"], ff["accepted"], ff["defined_at"]) == (False, False, None)
    assert doc["files"] == []
    assert doc["sglang"]["modified_since_install"] == {"checked": True, "scope": "sglang/srt", "changed": [],
                                                       "added": [], "missing": []}


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_flag_accepted_only_when_patched_each_style(site_copy, version):
    site = site_copy(version)
    rec = sglang_patch.patch_flag_only(site)
    doc = run_inspector(base_args(site)).doc
    ff = doc["flags"]["feature_flag"]
    assert ff["defined"] and ff["defined_at"]["line"] == rec.find("field" if version == "0.5.23" else "add_argument").line
    if version == "0.5.23":  # derived from the annotated field of the Spec namespace, like arg_utils does
        assert ff["defined_at"]["class"] == "Spec" and ff["defined_at"]["style"] == "annotated-field"
        assert any(s["style"] == "annotated-field" and s["file"].endswith("fields/spec.py")
                   for s in doc["flags"]["sources"])
    else:
        assert ff["defined_at"]["style"] == "add_argument"
    assert doc["marker"]["hits"] == []  # flag without the log line

    site2 = site_copy(version, "marker-only")
    rec2 = sglang_patch.patch_marker_only(site2)
    doc2 = run_inspector(base_args(site2)).doc
    assert not doc2["flags"]["feature_flag"]["accepted"]
    assert [h["line"] for h in doc2["marker"]["hits"]] == [rec2.marker_line.line]


def test_annotated_field_flag_with_no_cli_is_not_a_flag(site_copy):
    """arg_utils skips Arg(no_cli=True) fields: a patch declared that way adds no CLI flag."""
    site = site_copy("0.5.23")
    spec = site / "sglang/srt/arg_groups/fields/spec.py"
    text = spec.read_text()
    anchor = re.search(r"\n    speculative_eagle_topk: A\[", text).start()
    text = (text[:anchor] + "\n    speculative_disable_batch_threshold: A[Optional[int], Arg(help=\"x\", no_cli=True)] = None"
            + "\n    speculative_disable_batch_threshold_alt: A[\n        Optional[int],\n        Arg(help=\"y\", "
            "cli_name=\"--dyn-threshold\", aliases=[\"--dyn-thr\"]),\n    ] = None" + text[anchor:])
    rewrite(spec, text)
    doc = run_inspector(base_args(site, flags=["--dyn-threshold", "--dyn-thr", "--speculative-disable-batch-threshold-alt"])).doc
    ff = doc["flags"]["feature_flag"]
    assert not ff["defined"]
    assert doc["flags"]["no_cli_fields"]["speculative_disable_batch_threshold"]["file"] == str(spec)
    by = {u["flag"]: u for u in doc["flags"]["user_flags"]}
    assert by["--dyn-threshold"]["defined"] and by["--dyn-thr"]["defined"]
    assert not by["--speculative-disable-batch-threshold-alt"]["defined"]  # cli_name replaces the derived name


# --------------------------------------------------------------------------------------------------
# flags of each release (statically, faithfully to argparse)

FLAG_CASES = {
    # flag: versions that define it
    "--speculative-eagle-topk": set(VERSIONS),
    "--speculative-draft-model": set(VERSIONS),  # alias of --speculative-draft-model-path
    "--speculative-adaptive": {"0.5.11", "0.5.12.post1", "0.5.13", "0.5.23"},
    "--enable-multi-layer-eagle": {"0.5.9", "0.5.11", "0.5.12.post1", "0.5.13", "0.5.23"},
    "--disable-overlap-schedule": set(VERSIONS),
    "--enable-beta-spec": set(),  # replaced by SGLANG_ENABLE_SPEC_V2 in 0.5.4.post1
    "--speculative-boundary-reduction": set(),  # 0.5.23: a no_cli field
    "--no-speculative-enable-w4a4-mxfp4-megamoe": {"0.5.23"},  # BooleanOptionalAction
    "--speculative-ngram-branch-length": {"0.5.4.post1", "0.5.9"},  # replaced in 0.5.10
}


@pytest.mark.parametrize("version", VERSIONS)
def test_user_flags_defined_and_accepted(site_copy, version):
    site = site_copy(version)
    flags = []
    for f in FLAG_CASES:
        flags += [f, "1"]
    flags += ["--speculative-eagle=4", "--speculative-draft", "-1"]
    doc = run_inspector(base_args(site, flags=flags)).doc
    by = {u["flag"]: u for u in doc["flags"]["user_flags"]}
    assert "-1" not in by and "1" not in by
    for f, versions in FLAG_CASES.items():
        assert by[f]["defined"] == (version in versions), (f, version)
        assert by[f]["accepted"] == (version in versions), (f, version)
    # argparse takes unambiguous prefixes (allow_abbrev) and rejects ambiguous ones
    assert by["--speculative-eagle=4"]["accepted"] and not by["--speculative-eagle=4"]["defined"]
    assert by["--speculative-eagle=4"]["abbreviation_of"] == "--speculative-eagle-topk"
    assert not by["--speculative-draft"]["accepted"] and len(by["--speculative-draft"]["ambiguous"]) > 1


@pytest.mark.parametrize("version", VERSIONS)
def test_spec_v2_env_default_raw_fact_matches_table(site_copy, version):
    site = site_copy(version)
    env = run_inspector(base_args(site)).doc["env_defaults"]["SGLANG_ENABLE_SPEC_V2"]
    switch = knowledge().overlap_range(version).switch
    if switch.kind == "env":
        assert env["present"] and env["kind"] == "EnvBool" and env["default"] is switch.default
        assert env["file"] == str(site / "sglang/srt/environ.py") and env["raw"] == f"EnvBool({switch.default})"
    else:
        assert not env["present"]


# --------------------------------------------------------------------------------------------------
# marker shapes


def _replace_marker_line(site: Path, *new_lines: str) -> int:
    """Put `new_lines` where patch_marker_only put the f-string line; returns that line number."""
    rec = sglang_patch.patch_marker_only(site)
    ins = rec.marker_line
    lines = ins.file.read_text().splitlines(keepends=True)
    indent = lines[ins.line - 1][: len(lines[ins.line - 1]) - len(lines[ins.line - 1].lstrip())]
    lines[ins.line - 1:ins.line] = [indent + ln + "\n" for ln in new_lines]
    rewrite(ins.file, "".join(lines))
    return ins.line


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_marker_as_percent_format_string(site_copy, version):
    site = site_copy(version)
    line = _replace_marker_line(site, 'logger.info("Dynamic speculation disable enabled: threshold=%d", 7)')
    (hit,) = run_inspector(base_args(site)).doc["marker"]["hits"]
    assert (hit["line"], hit["kind"], hit["qualname"], hit["pattern_matches"]) == (line, "str", "EAGLEWorkerV2.__init__", True)


def test_marker_split_by_implicit_concatenation_is_found_by_ast(site_copy):
    site = site_copy("0.5.23")
    line = _replace_marker_line(site, 'logger.info(', '    "Dynamic speculation "', '    f"disable enabled: threshold={7}"', ')')
    doc = run_inspector(base_args(site)).doc
    assert doc["marker"]["files_with_literal"] == [] and doc["marker"]["files_with_words"]
    (hit,) = doc["marker"]["hits"]
    assert hit["kind"] == "fstring" and hit["qualname"] == "EAGLEWorkerV2.__init__"
    assert line + 1 <= hit["line"] <= line + 2 and hit["pattern_matches"] is True


def test_marker_text_that_cannot_match_the_pattern(site_copy):
    site = site_copy("0.5.9")
    _replace_marker_line(site, 'logger.info(f"Dynamic speculation disable enabled (threshold {7})")')
    (hit,) = run_inspector(base_args(site)).doc["marker"]["hits"]
    assert hit["pattern_matches"] is False  # the log rule would never fire on this line


def test_marker_in_comment_and_nested_function(site_copy):
    site = site_copy("0.5.23")
    line = _replace_marker_line(site, "# Dynamic speculation disable enabled (commented out)", "def _announce():",
                                '    logger.info(f"Dynamic speculation disable enabled: threshold={1}")', "_announce()")
    hits = run_inspector(base_args(site)).doc["marker"]["hits"]
    assert [(h["line"], h["kind"]) for h in hits] == [(line, "non-string"), (line + 2, "fstring")]
    assert hits[0]["qualname"] == "EAGLEWorkerV2.__init__"
    assert hits[1]["qualname"] == "EAGLEWorkerV2.__init__.<locals>._announce"
    assert (hits[1]["class"], hits[1]["function"]) == ("EAGLEWorkerV2", "_announce")


def test_marker_in_a_subclass_reports_its_bases_as_written(site_copy):
    site = site_copy("0.5.23")
    rec = sglang_patch.patch_marker_only(site, worker_module="standalone_worker_v2", worker_class="StandaloneWorkerV2")
    (hit,) = run_inspector(base_args(site)).doc["marker"]["hits"]
    assert hit["line"] == rec.marker_line.line and hit["class"] == "StandaloneWorkerV2"
    assert hit["bases"] == knowledge().class_row("0.5.23", "StandaloneWorkerV2").bases == ["EAGLEWorkerV2"]


# --------------------------------------------------------------------------------------------------
# broken files


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_syntax_error_in_patched_file_is_reported_with_line(site_copy, version):
    site = site_copy(version)
    sglang_patch.patch_sglang(site)
    bad = sglang_patch.introduce_syntax_error(site)
    doc = run_inspector(base_args(site)).doc
    assert doc["ok"]
    entry = file_entry(doc, site / WORKER)
    assert entry["compiles"] is False
    err = entry["syntax_error"]
    assert err["line"] == bad.line and err["where"].startswith(f"{site / WORKER}:{bad.line}: ")
    assert err["text"].startswith("this line is not valid python")
    (hit,) = hits_in(doc, "eagle_worker_v2.py")  # still located, by bytes, without scope
    assert hit["kind"] == "syntax-error-file" and hit["class"] is None
    assert MARKER in (site / WORKER).read_text().splitlines()[hit["line"] - 1]


def test_error_only_the_compiler_sees_is_reported(site_copy):
    """ast.parse accepts a module-level `return`; compile() does not, nor does the import."""
    site = site_copy("0.5.23")
    sglang_patch.patch_sglang(site)
    sglang_patch.introduce_syntax_error(site)  # put something at a known line, then swap its text
    path = site / WORKER
    text = path.read_text().replace(sglang_patch.SYNTAX_ERROR_TEXT, "return None  # misplaced")
    rewrite(path, text)
    line = text.splitlines().index("return None  # misplaced") + 1
    entry = file_entry(run_inspector(base_args(site)).doc, path)
    assert entry["compiles"] is False
    assert entry["syntax_error"]["line"] == line and "outside function" in entry["syntax_error"]["message"]


def test_syntax_error_in_server_args_leaves_flags_unknown(site_copy):
    site = site_copy("0.5.9")
    sglang_patch.patch_flag_only(site)
    bad = sglang_patch.introduce_syntax_error(site, "sglang/srt/server_args.py")
    doc = run_inspector(base_args(site)).doc
    assert doc["ok"] and doc["flags"]["count"] == 0
    assert any(f"server_args.py:{bad.line}:" in e for e in doc["flags"]["errors"])
    entry = file_entry(doc, site / "sglang/srt/server_args.py")  # found as modified since install
    assert entry["compiles"] is False and entry["syntax_error"]["line"] == bad.line


# --------------------------------------------------------------------------------------------------
# stale bytecode


@pytest.mark.parametrize("mode,code_runs", [
    (py_compile.PycInvalidationMode.TIMESTAMP, False),  # recompiled at import: harmless
    (py_compile.PycInvalidationMode.CHECKED_HASH, False),
    (py_compile.PycInvalidationMode.UNCHECKED_HASH, True),  # used as is: the old code runs
])
def test_stale_pyc_of_patched_file(site_copy, mode, code_runs):
    site = site_copy("0.5.9")
    worker = site / WORKER
    py_compile.compile(str(worker), doraise=True, invalidation_mode=mode)  # bytecode of the unpatched file
    sglang_patch.patch_sglang(site)
    entry = file_entry(run_inspector(base_args(site)).doc, worker)
    (pyc,) = entry["pyc"]
    assert pyc["tag"] == sys.implementation.cache_tag and pyc["used_by_this_interpreter"]
    assert pyc["validation"] == {"TIMESTAMP": "timestamp", "CHECKED_HASH": "checked-hash",
                                 "UNCHECKED_HASH": "unchecked-hash"}[mode.name]
    assert pyc["stale"] is True and entry["stale_pyc"] is True
    assert pyc["stale_code_runs"] is code_runs and entry["stale_code_runs"] is code_runs
    if mode is py_compile.PycInvalidationMode.TIMESTAMP:
        assert pyc["recorded_size"] != pyc["source_size"]

    py_compile.compile(str(worker), doraise=True, invalidation_mode=mode)  # fresh bytecode of the patch
    entry = file_entry(run_inspector(base_args(site)).doc, worker)
    assert entry["pyc"][0]["stale"] is False and not entry["stale_pyc"]


def test_pyc_of_another_interpreter_is_listed_not_used(site_copy):
    site = site_copy("0.5.9")
    worker = site / WORKER
    import subprocess

    subprocess.run([PY312, "-m", "py_compile", str(worker)], check=True, env=clean_env())
    sglang_patch.patch_sglang(site)
    entry = file_entry(run_inspector(base_args(site)).doc, worker)
    (pyc,) = entry["pyc"]
    assert pyc["tag"] == "cpython-312" and pyc["stale"] is True and not pyc["used_by_this_interpreter"]


# --------------------------------------------------------------------------------------------------
# diff parsing


def _diff(old_root: Path, new_root: Path, rels, prefix="python/") -> str:
    out = []
    for rel in rels:
        a = (old_root / rel).read_text().splitlines(keepends=True) if (old_root / rel).exists() else []
        b = (new_root / rel).read_text().splitlines(keepends=True) if (new_root / rel).exists() else []
        out.append(f"diff --git a/{prefix}{rel} b/{prefix}{rel}\n")
        out.extend(difflib.unified_diff(a, b, f"a/{prefix}{rel}" if a else "/dev/null",
                                        f"b/{prefix}{rel}" if b else "/dev/null", n=3))
    return "".join(out)


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_diff_hunks_map_to_class_and_function(site_copy, tmp_path, version):
    orig = site_copy(version, "orig")
    site = site_copy(version)
    rec = sglang_patch.patch_sglang(site)
    new_file = site / "sglang/srt/speculative/dynamic_disable.py"
    new_file.write_text("THRESHOLD = 8\n")
    rels = sorted({i.rel for i in rec.insertions}) + ["sglang/srt/speculative/dynamic_disable.py"]
    text = _diff(orig, site, rels)
    new_file.unlink()  # the user forgot to copy the new file into the install

    doc = run_inspector(base_args(site, patch_diff=text)).doc
    diff = doc["diff"]
    assert diff["parse_errors"] == []
    files = {f["diff_path"]: f for f in diff["files"]}
    assert set(files) == {"python/" + r for r in rels}
    assert diff["missing_files"] == ["python/sglang/srt/speculative/dynamic_disable.py"]
    nf = files["python/sglang/srt/speculative/dynamic_disable.py"]
    assert nf["new_file"] and not nf["present"] and nf["hunks"][0]["applied"] == "file-missing"

    scopes = {}
    for f in diff["files"]:
        if f["present"]:
            assert f["installed_path"] == str(site / f["diff_path"][len("python/"):])
        for h in f["hunks"]:
            if f["present"]:
                assert h["applied"] == "exact" and h["offset"] == 0
            for s in h["scopes"]:
                for ln in range(s["lines"][0], s["lines"][1] + 1):
                    scopes[(Path(f["installed_path"]).name, ln)] = (s["class"], s["function"])
    for ins in rec.insertions:
        for k, inserted in enumerate(ins.lines):
            if not re.search(r"speculative_disable_batch_threshold|--speculative-disable|getLogger|Dynamic", inserted):
                continue  # difflib may align a repeated line (`)`, `parser.add_argument(`) one line off
            got = scopes[(ins.file.name, ins.line + k)]
            want = {"marker": ("EAGLEWorkerV2", "__init__"), "add_argument": ("ServerArgs", "add_cli_args"),
                    "field": ("Spec" if version == "0.5.23" else "ServerArgs", None), "logger": (None, None)}[ins.what]
            assert got == want, (ins, k)

    # the same diff against the unpatched install: every hunk reads as not applied
    doc = run_inspector(base_args(orig, patch_diff=text)).doc
    states = {h["applied"] for f in doc["diff"]["files"] if f["present"] for h in f["hunks"]}
    assert states == {"not-applied"}
    assert doc["marker"]["hits"] == []


def test_diff_applied_at_an_offset_and_paths_without_repo_prefix(site_copy):
    orig = site_copy("0.5.9", "orig")
    site = site_copy("0.5.9")
    rec = sglang_patch.patch_marker_only(site)
    text = _diff(orig, site, [WORKER], prefix="")
    # the installed file has 2 more lines at the top than the tree the diff was made from
    path = site / WORKER
    rewrite(path, "# local edit 1\n# local edit 2\n" + path.read_text())
    doc = run_inspector(base_args(site, patch_diff=text)).doc
    (f,) = doc["diff"]["files"]
    assert f["installed_path"] == str(path) and f["present"]
    (h,) = [h for h in f["hunks"] if h["scopes"] and h["scopes"][0]["class"] == "EAGLEWorkerV2"]
    assert h["applied"] == "offset" and h["offset"] == 2
    assert h["scopes"][0]["lines"] == [rec.marker_line.line + 2] * 2
    assert doc["marker"]["hits"][0]["line"] == rec.marker_line.line + 2


# --------------------------------------------------------------------------------------------------
# which sglang


def test_two_installs_on_sys_path_and_marker_in_the_shadowed_one(site_copy):
    first = site_copy("0.5.23", "first")  # unpatched, wins
    second = site_copy("0.5.23", "second")
    rec = sglang_patch.patch_sglang(second)  # the user patched the copy that is not imported
    env = clean_env({"PYTHONPATH": f"{first}{os.pathsep}{second}"})
    doc = run_inspector(base_args(), env=env).doc
    sg = doc["sglang"]
    assert sg["package_dir"] == str(first / "sglang") and sg["multiple_installs"]
    installs = {i["package_dir"]: i for i in sg["installs"]}
    assert set(installs) == {str(first / "sglang"), str(second / "sglang")}
    assert installs[str(first / "sglang")]["active"] and not installs[str(second / "sglang")]["active"]
    assert doc["marker"]["hits"] == []
    (other,) = doc["marker"]["hits_in_other_installs"]
    assert other["file"] == str(rec.marker_line.file) and other["line"] == rec.marker_line.line
    assert not doc["flags"]["feature_flag"]["accepted"]


def test_version_mismatch_between_dist_info_and_package_is_warned(site_copy):
    site = site_copy("0.5.9")
    vfile = site / "sglang/_version.py"
    rewrite(vfile, vfile.read_text().replace("'0.5.9'", "'0.5.8'"))
    doc = run_inspector(base_args(site)).doc
    assert doc["sglang"]["version_py"] == "0.5.8" and doc["sglang"]["version"] == "0.5.9"
    assert any("disagreement" in w for w in doc["warnings"])


# --------------------------------------------------------------------------------------------------
# interpreters


@pytest.mark.parametrize("python", [sys.executable, PY310, PY312, PY38],
                         ids=["this", "py3.10", "py3.12", "py3.8"])
@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_other_interpreters(site_copy, python, version):
    if not os.path.exists(python):
        pytest.skip(f"{python} not on this machine")
    site = site_copy(version)
    rec = sglang_patch.patch_sglang(site)
    run = run_inspector(base_args(site, flags=["--speculative-eagle-topk", "1"]), python=python)
    doc = run.doc
    assert doc["ok"], doc["error"]
    assert os.path.realpath(doc["python"]["executable"]) == os.path.realpath(python)
    (hit,) = doc["marker"]["hits"]
    assert (hit["line"], hit["qualname"]) == (rec.marker_line.line, "EAGLEWorkerV2.__init__")
    assert doc["flags"]["feature_flag"]["defined"] and doc["flags"]["user_flags"][0]["defined"]
    assert all(f["compiles"] for f in doc["files"])


def test_the_folder_runs_in_place_too(site_copy, tmp_path):
    """`python -m dynspec_cli.engines.sglang.inspector` (debugging) gives the bundle's document."""
    site = site_copy("0.5.9")
    bundled = run_inspector(base_args(site), cwd=tmp_path).doc
    in_place = run_inspector(base_args(site), in_place=True, cwd=tmp_path).doc
    assert bundled["ok"] and in_place["ok"] and bundled["sglang"]["version"] == "0.5.9"
    for doc in (bundled, in_place):  # a wall time, different on every run
        assert isinstance(doc["sglang"]["changed_files"].pop("seconds"), float)
    for key in ("sglang", "marker", "flags", "files", "env_defaults"):
        assert in_place[key] == bundled[key], key


def test_sys_path_starts_with_the_cwd_as_for_the_server(site_copy, tmp_path):
    """`python -m sglang.launch_server` looks modules up from the cwd first; so does the inspector."""
    site = site_copy("0.5.9")
    doc = run_inspector(base_args(site), cwd=tmp_path).doc
    assert doc["python"]["sys_path"][:2] == [str(site), ""] and doc["python"]["cwd"] == str(tmp_path)


def test_a_long_diff_travels_on_stdin(site_copy):
    site = site_copy("0.5.9")
    doc = run_inspector(base_args(site, patch_diff="x" * 300_000)).doc
    assert doc["ok"] and doc["input"]["patch_diff_chars"] == 300_000 and doc["diff"]["files"] == []


# --------------------------------------------------------------------------------------------------
# speed: the static route is meant to be cheap enough to run before every launch


def test_static_route_is_fast_on_the_largest_release(site_copy):
    """Whole `python - args` process on 0.5.23 (2141 files under srt/). CPU time, not wall time: the
    CI box is shared and a wall-clock bound would measure the neighbours."""
    import resource

    site = site_copy("0.5.23")
    sglang_patch.patch_sglang(site)
    args = base_args(site, flags=["--speculative-eagle-topk", "4", "--speculative-adaptive"])
    best_cpu = best_wall = 99.0
    for _ in range(5):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        run = run_inspector(args)
        best_wall = min(best_wall, time.perf_counter() - t)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        best_cpu = min(best_cpu, r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
    assert run.doc["marker"]["hits"] and run.doc["flags"]["feature_flag"]["defined"]
    # target: well under 0.5 s; 0.40 s CPU measured on a 2-core box at load 7; the bound leaves room
    assert best_cpu < 1.0, f"static route used {best_cpu:.2f}s CPU at best (wall {best_wall:.2f}s, {run.doc['timings']})"


def test_diff_scopes_say_marker_and_behaviour(site_copy):
    """A multi-line logger call holding the marker is the announcement, not behaviour; a scope that
    adds only comments changes nothing that runs; code beside the marker in the same function is
    behaviour (role marker+behaviour in preflight)."""
    orig = site_copy("0.5.9", "orig")
    site = site_copy("0.5.9")
    path = site / WORKER
    lines = path.read_text().splitlines(keepends=True)
    init = next(i for i, x in enumerate(lines) if x.startswith("class EAGLEWorkerV2")) + 1
    init = next(i for i in range(init, len(lines)) if "# Parse arguments" in lines[i])
    draft = next(i for i, x in enumerate(lines) if x.startswith("    def draft(self, model_worker_batch"))
    assert draft < init  # (inserted bottom-up so the indices above stay right)
    lines[init:init] = ["        logger.info(\n", f'            f"{MARKER}: threshold={{5}}"\n', "        )\n",
                        "        self.dsd = 5\n"]
    lines[draft + 1:draft + 1] = ["        # only a comment\n"]
    rewrite(path, "".join(lines))  # (a new inode: the site is hard links to the cached wheel)
    doc = run_inspector(base_args(site, patch_diff=_diff(orig, site, [WORKER]))).doc
    scopes = {(s["class"], s["function"]): s for f in doc["diff"]["files"] for h in f["hunks"] for s in h["scopes"]}
    init_scope = scopes[("EAGLEWorkerV2", "__init__")]
    assert init_scope["marker"] is True and init_scope["behaviour"] is True  # self.dsd = 5
    comment = [s for k, s in scopes.items() if k[1] == "draft"]
    assert comment and all(s["marker"] is False and s["behaviour"] is False for s in comment)
    # without the assignment, the three-line call alone is the announcement only
    lines = path.read_text().splitlines(keepends=True)
    lines = [x for x in lines if x != "        self.dsd = 5\n"]
    rewrite(path, "".join(lines))  # (a new inode: the site is hard links to the cached wheel)
    doc = run_inspector(base_args(site, patch_diff=_diff(orig, site, [WORKER]))).doc
    (s,) = [s for f in doc["diff"]["files"] for h in f["hunks"] for s in h["scopes"] if s["function"] == "__init__"]
    assert s["marker"] is True and s["behaviour"] is False and s["lines"][1] - s["lines"][0] == 2
