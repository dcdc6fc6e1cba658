"""Stand-in for the renamed package of the DeViLoc report (a helper of ok_module_renamed.py)."""
