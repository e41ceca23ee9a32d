"""`dynspec guard`: a benchmark run watched window by window (watch.py), each window judged against
the feature's promise (windows.py), and the report (report.py)."""
