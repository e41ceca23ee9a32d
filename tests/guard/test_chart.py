"""The guarded run's chart (guard/chart.py), drawn from a report document: valid SVG whose points sit
where the accept lengths say, with the bad windows shaded and the reasons named."""
import xml.etree.ElementTree as ET

from dynspec_cli.guard import chart

NS = "{http://www.w3.org/2000/svg}"


def window(i, state, *accepts, tpv=None):
    return {"index": i, "start": (i - 1) * 10.0, "end": i * 10.0, "state": state, "tokens_per_verify": tpv,
            "ranks": [{"rank": f"DP{n}", "accept_len": a, "state": state} for n, a in enumerate(accepts)]}


DOC = {"schema": "dynspec-guard/1", "valid": False, "run": "r1", "feature": "dynamic-spec-disable", "threshold": 5,
       "window_s": 10.0, "ranks": ["DP0", "DP1"], "benchmark": {"exit_code": 0, "seconds": 30.0},
       "reasons": [{"code": "DS702", "kind": "collapsed", "window": 2, "message": "..."}],
       "windows": [window(1, "effective", 3.5, 3.0, tpv=3.2), window(2, "collapsed", 1.0, None, tpv=1.0),
                   window(3, "collapsed", 1.0, 1.0, tpv=None)]}


def test_points_shading_and_reasons():
    root = ET.fromstring(chart.svg(DOC))
    assert root.tag == NS + "svg"
    circles = [(float(c.get("cx")), float(c.get("cy"))) for c in root.iter(NS + "circle")]
    # 5 known accept lengths (one is None) and 2 tokens-per-verify values
    assert len(circles) == 7
    axis_y = chart.HEIGHT - chart.BOTTOM  # accept length 1.0 is the x axis
    at_one = [cy for _, cy in circles if abs(cy - axis_y) < 0.1]
    assert len(at_one) == 4  # DP0 in windows 2 and 3, DP1 in window 3, the counters in window 2
    # window 1's DP0 point is in its middle (5 s of 30) and above DP1's (3.5 > 3.0)
    first = sorted(circles)[:3]
    assert all(abs(cx - (chart.LEFT + (chart.WIDTH - chart.LEFT - chart.RIGHT) * 5 / 30)) < 0.1 for cx, _ in first)
    ph = chart.HEIGHT - chart.TOP - chart.BOTTOM  # the y axis runs 1.0 to 4.0 here (the largest value + 0.5)
    assert [round(cy, 1) for _, cy in first] == [round(chart.TOP + ph * (1 - v / 3.0), 1) for v in (2.5, 2.2, 2.0)]
    shaded = [r for r in root.iter(NS + "rect") if r.get("fill") == "#c62828"]
    assert len(shaded) == 2  # windows 2 and 3
    texts = [t.text for t in root.iter(NS + "text")]
    assert "INVALID" in texts and "DS702 collapsed from window 2" in texts
    assert texts.count("collapsed") == 1  # the state is written once for its run of windows


def test_path_is_beside_the_report():
    assert chart.path_for("out/bench.dynspec-guard.json") == "out/bench.dynspec-guard.svg"
    assert chart.path_for("report") == "report.svg"


def test_a_run_with_no_window_still_draws():
    doc = dict(DOC, windows=[], reasons=[], valid=True)
    root = ET.fromstring(chart.svg(doc))
    assert "VALID" in [t.text for t in root.iter(NS + "text")]
