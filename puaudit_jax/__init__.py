"""puaudit-jax: auditing LLM judges with partial optimal transport."""
