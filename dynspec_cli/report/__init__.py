"""How verdicts are shown: a rich report for people, JSON for scripts (same content)."""
