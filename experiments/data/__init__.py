"""Scripts that rebuild the bundled data samples from public repositories (run once, by hand)."""
