"""Worked examples shared by the unit and integration tests."""
