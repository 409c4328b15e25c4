"""Message filtering shared by broker and client (upstream ``org.apache.rocketmq.filter``).

* ``ExpressionType``: the subscription's ``expressionType`` values (``TAG``, ``SQL92``) and
  upstream's ``ExpressionType.isTagType`` (null, empty and ``TAG`` are tag expressions).
* ``compile_sql92(text) -> Sql92Expression``: parse once; ``matches(properties)`` per
  message. ``FilterError`` (with upstream's ``remark``) when the text does not compile.
  See ``sql92`` for the grammar and the evaluation rules.
"""

from __future__ import annotations

from .sql92 import EvaluationError, FilterError, Sql92Expression, compile_sql92

__all__ = ["ExpressionType", "EvaluationError", "FilterError", "Sql92Expression", "compile_sql92"]


class ExpressionType:
    """``org.apache.rocketmq.common.filter.ExpressionType``."""

    TAG = "TAG"
    SQL92 = "SQL92"

    @staticmethod
    def is_tag_type(expression_type: str | None) -> bool:
        """Null, empty and ``TAG`` select by tags; anything else is a property filter."""
        return not expression_type or expression_type == ExpressionType.TAG
