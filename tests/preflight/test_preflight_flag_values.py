"""Preflight judges flag values as the release's own argparse parser would (DS110), on real wheels.

Expected values were read from the wheels' sources, not from dynspec's tables:
  0.5.9  sglang/srt/server_args.py: "--tp-size" type=int (l. 3303); "--speculative-algorithm" type=str,
         choices=["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"] (l. 3925); "--load-format"
         choices=LOAD_FORMAT_CHOICES, a module-level list holding "safetensors" (l. 77, 2927);
         "--disable-overlap-schedule" action="store_true" (l. 4560).
  0.5.23 sglang/srt/arg_groups/fields/parallel.py: tp_size: A[int, Arg(...)] -> type=int;
         fields/spec.py: speculative_algorithm: A[Optional[str], "..."] -> no choices (any registered
         name); fields/model.py: load_format choices=LOAD_FORMAT_CHOICES from arg_groups/choices.py;
         fields/schedule.py: disable_overlap_schedule: A[bool, ...] -> store_true (arg_utils.py).
"""
import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.wheels

DYNSPEC = [sys.executable, "-m", "dynspec_cli"]
BASE = ["--model-path", "/m", "--speculative-draft-model-path", "/d", "--speculative-eagle-topk", "1",
        "--speculative-disable-batch-threshold", "5"]


def preflight(py, *flags, env=("SGLANG_ENABLE_SPEC_V2=True",), profile=None):
    head = [profile, "--python", py] if profile else ["--python", py]
    cmd = DYNSPEC + ["preflight", *head, "--json"] + [f"--env={e}" for e in env] + ["--", *flags]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    doc = json.loads(r.stdout)
    assert r.returncode == doc["exit_code"], r.stderr
    doc["ds110"] = [f["message"] for f in doc["findings"] if f["code"] == "DS110"]
    return doc


@pytest.fixture(scope="module")
def pythons(tmp_path_factory):
    from tests.preflight.conftest import make_sglang_python

    t = tmp_path_factory.mktemp("flagvalues")
    return {v: make_sglang_python(t, v)[0] for v in ("0.5.9", "0.5.23")}


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_good_values_are_reachable(pythons, version):
    d = preflight(pythons[version], *BASE, "--speculative-algorithm", "EAGLE3", "--tp-size", "2",
                  "--load-format", "safetensors", "--disable-overlap-schedule")
    assert d["ds110"] == [], d["ds110"]


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_tp_size_one_is_dead(pythons, version):
    d = preflight(pythons[version], *BASE, "--speculative-algorithm", "EAGLE3", "--tp-size", "one")
    assert d["verdict"] == "dead" and d["exit_code"] == 1
    (m,) = d["ds110"]
    assert "--tp-size one" in m and "invalid int value 'one'" in m


def test_an_abbreviation_is_judged_as_the_flag(pythons):
    d = preflight(pythons["0.5.9"], *BASE, "--speculative-algorithm", "EAGLE3", "--tp=1.5")
    (m,) = d["ds110"]
    assert "invalid int value '1.5'" in m


def test_algorithm_choices_differ_by_release(pythons):
    bad = preflight(pythons["0.5.9"], *BASE, "--speculative-algorithm", "eagle3")  # choices are case-sensitive
    assert bad["verdict"] == "dead"
    (m,) = bad["ds110"]
    assert "invalid choice 'eagle3'" in m and "EAGLE3" in m
    # 0.5.23 registers no choices for it (any registered algorithm name goes)
    assert preflight(pythons["0.5.23"], *BASE, "--speculative-algorithm", "MYALGO")["ds110"] == []


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_choices_from_a_module_level_list(pythons, version):
    d = preflight(pythons[version], *BASE, "--speculative-algorithm", "EAGLE3", "--load-format", "safetensorz")
    (m,) = d["ds110"]
    assert "invalid choice 'safetensorz'" in m and "safetensors" in m


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_a_value_after_a_switch(pythons, version):
    d = preflight(pythons[version], *BASE, "--speculative-algorithm", "EAGLE3", "--disable-overlap-schedule", "true")
    (m,) = d["ds110"]
    assert "takes no value" in m and "'true'" in m
    d = preflight(pythons[version], *BASE, "--speculative-algorithm", "EAGLE3", "--disable-overlap-schedule=1")
    (m,) = d["ds110"]
    assert "takes no value" in m
    d = preflight(pythons[version], *BASE, "--speculative-algorithm", "EAGLE3", "--disable-overlap-sch", "yes")
    (m,) = d["ds110"]  # an abbreviation of the switch (argparse's allow_abbrev)
    assert "takes no value" in m and "--disable-overlap-schedule" in m


def test_a_missing_value(pythons):
    d = preflight(pythons["0.5.9"], *BASE, "--speculative-algorithm", "EAGLE3", "--tp-size", "--trust-remote-code")
    (m,) = d["ds110"]
    assert "--tp-size" in m and "expects one argument" in m


def test_a_profile_with_tp_size_one(pythons, tmp_path):
    """The issue's case: `tp-size = "one"` in a profile used to give reachable."""
    prof = tmp_path / "p.toml"
    prof.write_text(f'name = "p"\nhost = "local"\npython = "{pythons["0.5.9"]}"\n[env]\nSGLANG_ENABLE_SPEC_V2 = "True"\n'
                    '[flags]\nmodel-path = "/m"\ntp-size = "one"\nspeculative-algorithm = "EAGLE3"\n'
                    'speculative-draft-model-path = "/d"\nspeculative-eagle-topk = 1\n'
                    'speculative-disable-batch-threshold = 5\nmax-running-requests = 64\n')
    r = subprocess.run(DYNSPEC + ["preflight", str(prof), "--json"], capture_output=True, text=True, timeout=180)
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "dead" and r.returncode == 1
    assert [f["code"] for f in doc["findings"] if f["code"] == "DS110"] == ["DS110"]
