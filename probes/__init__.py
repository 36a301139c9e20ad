"""probes: Flax transformer ports, hidden-state extraction, PLS and BoRP."""
