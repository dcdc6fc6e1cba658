"""Stand-in for the repository root of the etra-reading-comprehension report (helpers of the module scripts)."""
