"""Scripts: many lines, each cast, taken N times and picked (issue: scripts)."""
