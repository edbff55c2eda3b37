"""Offline datasets for the curve families, each loader returning in-memory tensors (inputs, labels)."""
