"""The terminal chart marks the threshold and every batch that contradicts the feature's promise;
the HTML chart is well-formed inline SVG with the threshold drawn."""
import xml.etree.ElementTree as ET

from dynspec_cli.prove.report import by_batch, chart_lines, html_report, svg_chart


def doc(lines):
    steps = [{"index": 1, "concurrency": 8, "decode": [{"running": r, "accept_len": a, "stable": st, "offset": i}
                                                       for i, (r, a, st) in enumerate(lines)],
              "running_range": [1, 8], "running_mode": 8, "accept_len": 1.0, "speculation": "off", "expected": "off",
              "outcome": "pass", "evidence": ["x < y & z"]}]
    return {"threshold": 5, "epsilon": 0.05, "expect": {"speculate_at_or_below_threshold": True}, "steps": steps,
            "target": {"run": "r", "host": "local", "url": None}, "feature": "f", "threshold_source": "--threshold",
            "plan": {"steps": [8], "duration": 1, "max_requests": 0}, "conclusion": {"outcome": "fails", "message": "m"}}


def test_chart_marks_threshold_and_contradictions():
    d = doc([(2, 2.8, True), (2, 2.6, True), (2, 9.0, False), (8, 2.4, True), (8, 2.4, True), (6, None, True)])
    assert by_batch(d) == [(2, 2.7, 2), (6, 1.0, 1), (8, 2.4, 2)]  # unsteady line left out; no accept len = 1.0
    text = "\n".join(chart_lines(d))
    lines = text.splitlines()
    th = next(i for i, ln in enumerate(lines) if "threshold 5 ─" in ln)
    assert "batch    2" in lines[th - 1] and "batch    6" in lines[th + 1]
    assert "✗ expected off" in lines[th + 2] and "✗" not in lines[th - 1] and "✗" not in lines[th + 1]


def test_svg_and_html_are_self_contained():
    d = doc([(2, 2.8, True), (8, 1.0, True)])
    svg = ET.fromstring(svg_chart(d))
    texts = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text")]
    assert "threshold 5" in texts and any("step 1" in (t or "") for t in texts)
    html = html_report(d)
    assert "<script" not in html and "x &lt; y &amp; z" in html and "FAILS" in html
