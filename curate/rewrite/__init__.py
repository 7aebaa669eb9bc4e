"""LLM rewriter: prompts, validation, the InferenceRunner job and its datatrove steps (see docs/rewrite.md)."""
