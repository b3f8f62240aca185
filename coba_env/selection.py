"""Re-export of ``coba_env.rules.selection`` (the STOP rule's home), for existing imports."""

from coba_env.rules.selection import (
    RULES,
    SelectionRule,
    default_fusion_weights,
    select_by_rule,
    select_candidate,
)

__all__ = ["RULES", "SelectionRule", "default_fusion_weights", "select_by_rule", "select_candidate"]
