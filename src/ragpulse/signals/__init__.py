"""Signals: an evaluation as span attributes, score points and log events, under the policy."""
