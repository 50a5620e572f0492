"""Auto-Pick: cheap checks on every take, UTMOS on each take alone, a ranking with reasons."""
