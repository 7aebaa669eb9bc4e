"""mathmix: a math mid-training data pipeline (web crawl -> corpus -> branches -> shards -> mid-training -> evals)."""

__version__ = "0.1.0"
