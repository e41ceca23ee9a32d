"""How a verdict is reached: observations are grouped into launches (judge) and the newest
launch is judged against the knowledge tables (worker analysis, findings)."""
