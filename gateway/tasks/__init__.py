"""Declared tasks (task files, their serving, interview sessions) and the state they keep."""
