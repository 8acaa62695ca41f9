"""Volcano's actions, each run over the session in the conf's order."""
