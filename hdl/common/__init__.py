"""Blocks and helpers shared by the designs."""
