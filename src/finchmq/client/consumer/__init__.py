"""Consumers: push (a listener per message), lite pull (poll), and the low-level pull API."""
