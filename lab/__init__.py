"""The lab: the scripts that measured the GPUs behind tcnumerics's tables (not part of the installed package; lab/README.md)."""
