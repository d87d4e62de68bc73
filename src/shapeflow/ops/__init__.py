"""Primitives, one class each (infer / saved / forward / backward), and their functions."""
