"""Evaluation: running policies over episodes, metrics, paired bootstrap, tables, figures, ``coba bench``."""
