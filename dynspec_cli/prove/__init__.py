"""`dynspec prove` and `dynspec gate`: watching the patched feature do its job, and a receipt a
benchmark script can check cheaply.

    plan          what to run: the threshold, the concurrency steps, bounds, time spans
    observations  what a step left behind: `Decode batch` lines and probe hits (dynspec's own evidence
                  code), per-request meta_info, /server_info and /metrics from the load generator
    decision      per step and overall: was speculation on, was that expected, pass / fail / inconclusive
    session       running the steps on the server's host (the load generator runs there)
    receipt       what was proven about which server process and files; the gate's checks
    report        the table, the terminal chart, report.html with an inline SVG chart
"""
