"""Read-only check of a user's SQL, done with DuckDB's own parser before anything runs.

Two layers, because neither is enough alone (both measured on DuckDB 2.0.1): the audit connection runs with
`enable_external_access=false` + `allowed_directories=[RUN]` + `lock_configuration=true`, which stops reads and
writes outside the run folder and any SET, but still lets `COPY ... TO 'RUN/x.csv'` (and `EXPLAIN ANALYZE COPY`)
write inside the run folder and a data-modifying CTE (`WITH x AS (INSERT ...) SELECT`) parse as a SELECT. So the
statement type comes from `duckdb.extract_statements`, and SELECTs are walked in their `json_serialize_sql` tree.
"""

from __future__ import annotations

import json
import re
from typing import Any

import duckdb

# PRAGMAs that only read the catalog (DuckDB rewrites them into SELECTs over the matching table functions).
READ_ONLY_PRAGMAS = {
    "table_info",
    "show",
    "show_tables",
    "show_tables_expanded",
    "show_databases",
    "database_list",
    "version",
    "platform",
    "functions",
    "collations",
}
# Query nodes a read-only statement may hold; INSERT/UPDATE/DELETE/... query nodes (data-modifying CTEs) may not.
ALLOWED_QUERY_NODES = {"SELECT_NODE", "SET_OPERATION_NODE", "RECURSIVE_CTE_NODE", "CTE_NODE"}
# Table functions that run a SQL string of their own, which would escape this check.
REFUSED_TABLE_FUNCTIONS = {"query", "query_table"}
_EXPLAIN_PREFIX = re.compile(r"^\s*explain\s+(?:analyze\s+)?(?:\([^)]*\)\s*)?", re.IGNORECASE)
_PRAGMA_NAME = re.compile(r"^\s*pragma\s+([a-z_][a-z0-9_]*)", re.IGNORECASE)
# The statement's leading keyword(s), after comments: DuckDB gives INSTALL and LOAD one type (LOAD), USE and
# RESET the type SET, CHECKPOINT the type CALL; the refusal names what the user wrote.
_KEYWORD = re.compile(r"^(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*((?:force\s+)?[a-z]+)", re.IGNORECASE | re.DOTALL)
ALLOWED_KINDS = "SELECT / WITH / FROM / DESCRIBE / SUMMARIZE / SHOW / EXPLAIN / PIVOT and read-only PRAGMAs"


class AuditRefused(ValueError):
    """A statement the audit connection does not run (it writes, changes settings, or reads outside RUN)."""


class AuditSyntaxError(AuditRefused):
    """A query DuckDB's parser cannot read: a mistake in it, not a refusal; its message is one line (DuckDB's
    first line and the query line it points at). An AuditRefused, so that every caller still stops on it."""


_LINE = re.compile(r"^LINE (\d+):", re.MULTILINE)


def syntax_error(err: duckdb.Error) -> AuditSyntaxError:
    """DuckDB's parser error in one line: `Parser Error: syntax error at or near "SELEC" (line 1)`, without the
    query line and the caret under it, which took three more lines."""
    text = str(err)
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(err).__name__)
    where = _LINE.search(text)
    return AuditSyntaxError(
        f"{first} (line {where.group(1)})" if where and first != where.group(0) else first
    )


def check_read_only(sql: str) -> str:
    """Return the single statement in `sql` if it only reads; raise AuditRefused (with the reason) otherwise."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as err:
        raise syntax_error(err) from None
    if len(statements) != 1:
        raise AuditRefused(f"exactly one statement per query, got {len(statements)}")
    statement = statements[0]
    _check_statement(statement.type, statement.query)
    return statement.query


def _check_statement(kind: duckdb.StatementType, query: str) -> None:
    name = str(kind).rsplit(".", 1)[-1]
    if kind == duckdb.StatementType.SELECT:
        _check_select_tree(query)
    elif kind == duckdb.StatementType.EXPLAIN:
        # EXPLAIN ANALYZE runs the statement it explains: the inner statement must pass the same check.
        inner = _EXPLAIN_PREFIX.sub("", query, count=1)
        try:
            inner_statements = duckdb.extract_statements(inner) if inner != query else []
        except duckdb.Error:
            inner_statements = []  # e.g. a comment between EXPLAIN and ANALYZE: not worth guessing
        if len(inner_statements) != 1:
            raise AuditRefused("EXPLAIN must wrap exactly one read-only statement")
        _check_statement(inner_statements[0].type, inner_statements[0].query)
    elif kind == duckdb.StatementType.PRAGMA:
        match = _PRAGMA_NAME.match(query)
        if not match or match.group(1).lower() not in READ_ONLY_PRAGMAS:
            raise AuditRefused(
                f"PRAGMA {match.group(1) if match else '?'} refused: only read-only PRAGMAs "
                f"({', '.join(sorted(READ_ONLY_PRAGMAS))}) are allowed"
            )
    else:
        match = _KEYWORD.match(query)
        keyword = " ".join(match.group(1).upper().split()) if match else name
        raise AuditRefused(
            f"{keyword} statements are refused: the audit is read-only (allowed: {ALLOWED_KINDS})"
        )


def _check_select_tree(query: str) -> None:
    parser = duckdb.connect()  # a bare connection used only to parse; nothing here touches the run's views
    try:
        row = parser.execute("SELECT json_serialize_sql(?)", [query]).fetchone()
        tree = json.loads(row[0]) if row else {"error": True}
    finally:
        parser.close()
    if tree.get("error"):
        # json_serialize_sql only handles plain SELECT trees; anything it cannot serialize is not accepted.
        raise AuditRefused(f"query refused: {tree.get('error_message', 'not a plain SELECT')}")
    for node in _walk(tree):
        node_type = node.get("type")
        if (
            isinstance(node_type, str)
            and node_type.endswith("_NODE")
            and node_type not in ALLOWED_QUERY_NODES
        ):
            raise AuditRefused(
                f"query refused: it holds a {node_type} (data-modifying statements are not allowed)"
            )
        if node_type == "TABLE_FUNCTION":
            name = (node.get("function") or {}).get("function_name", "")
            if name.lower() in REFUSED_TABLE_FUNCTIONS:
                raise AuditRefused(f"table function {name}() refused: it runs SQL text the check cannot see")


def _walk(value: Any):
    if isinstance(value, dict):
        yield value
        for child in value.values():
            yield from _walk(child)
    elif isinstance(value, list):
        for child in value:
            yield from _walk(child)
