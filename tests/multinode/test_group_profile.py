"""Group profiles and the cross-node preflight comparison, without hosts."""
from __future__ import annotations

import pytest

from dynspec_cli.knowledge.tables import ConfigError
from dynspec_cli.place.group import preflight as P
from dynspec_cli.place.group import profile as G
from tests.multinode.helpers import write_group_profile


def test_hosts_become_node_profiles_with_rank_flags(tmp_path):
    prof = write_group_profile(tmp_path / "g.toml", "big", ["a", "root@b", "c"],
                               nodes={1: {"env": {"X": "1"}, "python": "/opt/py"}, "c": {"flags": {"max-running-requests": 64}}})
    spec = G.load_group(str(prof), node_env=["2:Y=2"])
    assert spec.hosts == ["a", "root@b", "c"] and spec.base.host == "a" and spec.dist_init_port == 0
    profs = [G.node_profile(spec, i, "10.0.0.1:1234") for i in range(3)]
    assert [p.name for p in profs] == ["big-n0", "big-n1", "big-n2"]
    assert [p.host for p in profs] == ["a", "root@b", "c"]
    for i, p in enumerate(profs):
        argv = p.argv()
        assert argv[argv.index("--nnodes") + 1] == "3" and argv[argv.index("--node-rank") + 1] == str(i)
        assert argv[argv.index("--dist-init-addr") + 1] == "10.0.0.1:1234"
    assert profs[1].env["X"] == "1" and "X" not in profs[0].env and profs[1].python == "/opt/py"
    assert profs[2].flags["max-running-requests"] == 64 and profs[2].env["Y"] == "2"


@pytest.mark.parametrize("extra, msg", [
    ('hosts = []\n', "non-empty list"),
    ('dist_init_port = 70000\n', "dist_init_port"),
    ('[nodes.7]\nenv = {}\n', "neither a host"),
    ('[nodes.0]\nport = 1\n', "may hold only"),
])
def test_bad_group_profiles_are_one_line_errors(tmp_path, extra, msg):
    prof = write_group_profile(tmp_path / "g.toml", "big", ["a", "b"])
    text = prof.read_text()
    if extra.startswith("hosts"):
        text = text.replace('hosts = ["a", "b"]\n', extra)
        prof.write_text(text)
    elif extra.startswith("dist_init_port"):
        prof.write_text(extra + text)
    else:
        prof.write_text(text + extra)
    with pytest.raises(ConfigError, match=msg):
        G.load_group(str(prof))


def test_rank_flags_in_the_profile_are_refused(tmp_path):
    prof = write_group_profile(tmp_path / "g.toml", "big", ["a", "b"], flags={"node-rank": 1})
    with pytest.raises(ConfigError, match="set by dynspec group"):
        G.load_group(str(prof))


def node(rank, version="0.5.9", hashes=None, flags=None):
    return {"rank": rank, "host": f"h{rank}", "version": version,
            "hashes": hashes if hashes is not None else {"sglang/srt/speculative/eagle_worker_v2.py": "aa" * 32},
            "flags": flags or ["--tp-size", "2", "--node-rank", str(rank)]}


def test_identical_nodes_have_no_findings():
    assert P.compare_nodes([node(0), node(1), node(2)]) == []


def test_patched_file_hash_mismatch_names_node_and_file():
    out = P.compare_nodes([node(0), node(1, hashes={"sglang/srt/speculative/eagle_worker_v2.py": "bb" * 32})])
    assert [(f.code, f.rank, f.file) for f in out] == [
        ("DS402", 1, "sglang/srt/speculative/eagle_worker_v2.py")]
    assert "differs" in out[0].message


def test_missing_patch_version_and_flag_mismatches():
    out = P.compare_nodes([node(0), node(1, version="0.5.10", hashes={},
                                          flags=["--tp-size", "4", "--node-rank", "1"])])
    codes = sorted(f.code for f in out)
    assert codes == ["DS401", "DS402", "DS403"]
    assert any("no patched file" in f.message for f in out)


def test_flags_may_differ_only_in_node_rank():
    assert P._flags_without_rank(["--a", "1", "--node-rank", "3", "--node-rank=4", "--b"]) == ["--a", "1", "--b"]


@pytest.mark.parametrize("other, code", [
    (node(1, version="0.5.10"), "DS401"),  # another release dispatches, logs and patches differently
    (node(1, hashes={"sglang/srt/speculative/eagle_worker_v2.py": "cc" * 32}), "DS402"),  # a partial rollout
    (node(1, flags=["--tp-size", "4", "--node-rank", "1"]), "DS403"),  # nodes must agree on their arguments
])
def test_each_node_mismatch_makes_the_group_dead(other, code):
    from dynspec_cli.knowledge.findings import forced_verdict

    found = P.compare_nodes([node(0), other])
    assert [f.code for f in found] == [code]
    assert forced_verdict(found, "group") == "dead"


def test_a_dead_node_preflight_makes_the_group_dead():
    from dynspec_cli.knowledge.findings import Finding, forced_verdict

    assert forced_verdict([Finding("DS404", "preflight on node 1 (h1) is dead", rank=1, host="h1")], "group") == "dead"
