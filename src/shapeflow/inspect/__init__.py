"""Seeing what a model does: the shape chain, summaries, contracts, memory and graphs."""
