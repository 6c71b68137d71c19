"""The first of two read-only checks: the statement as sqlglot reads it in the connection's
dialect. Exactly one statement, a query (SELECT, WITH, VALUES, set operations, EXPLAIN of
one), and nothing in it that writes, changes the session or reaches files, programs, the
network or other roles. It fails closed: what it cannot read is refused.

The engine enforces read-only as well (`engines`): this check gives the model a reason,
and the engine is the boundary for what no parser sees (SQL inside a string).
"""

from __future__ import annotations

import logging
import re

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

QUERY_ROOTS = (exp.Select, exp.SetOperation, exp.Subquery, exp.Values)
WRITES = (
    exp.Insert,
    exp.Update,
    exp.Delete,
    exp.Merge,
    exp.Create,
    exp.Drop,
    exp.Alter,
    exp.TruncateTable,
    exp.Copy,
    exp.Command,
    exp.Grant,
    exp.Pragma,
    exp.Attach,
    exp.Transaction,
    exp.Commit,
    exp.Rollback,
    exp.Set,
    exp.Into,
    exp.Lock,
)
# Functions by lower-cased name: files, programs, the network, roles and sessions, locks,
# sequences, notifications, large objects, other sessions, SQL hidden in strings.
DENIED = {
    "pg_read_file", "pg_read_binary_file", "pg_ls_dir", "pg_stat_file", "pg_ls_logdir",
    "pg_ls_waldir", "pg_ls_tmpdir", "pg_ls_archive_statusdir", "pg_file_write",
    "set_config", "pg_reload_conf", "pg_rotate_logfile", "pg_switch_wal", "pg_promote",
    "pg_cancel_backend", "pg_terminate_backend", "pg_stat_reset", "pg_create_restore_point",
    "nextval", "setval", "pg_notify", "txid_current", "pg_current_xact_id",
    "query_to_xml", "query_to_xml_and_xmlschema", "query_to_xmlschema", "cursor_to_xml",
    "table_to_xml", "database_to_xml", "schema_to_xml", "xpath_table",
    "dblink_exec", "postgres_fdw_handler", "pg_import_system_collations",
    "load_extension", "readfile", "writefile", "fts3_tokenizer", "edit",
    "read_csv", "read_csv_auto", "read_parquet", "parquet_scan", "read_json",
    "read_json_auto", "read_json_objects", "read_ndjson", "read_ndjson_auto",
    "read_ndjson_objects", "read_text", "read_blob", "glob", "sniff_csv", "getenv",
    "read_xlsx", "iceberg_scan", "delta_scan", "sqlite_scan", "postgres_scan", "mysql_scan",
    "load_file", "sys_exec", "sys_eval", "benchmark",
}  # fmt: skip
DENIED_PREFIXES = ("lo_", "dblink", "pg_advisory", "pg_try_advisory", "pragma_", "pg_catalog.")
FILE_ENDINGS = (".csv", ".tsv", ".parquet", ".json", ".ndjson", ".xlsx", ".gz", ".db")
EXPLAIN = re.compile(r"^\s*explain\b(?P<options>(\s*\([^)]*\))?)\s*(?P<rest>.*)$", re.I | re.S)

log = logging.getLogger(__name__)


def refusal(sql: str, dialect: str) -> str | None:
    """Why `sql` may not run on a connection speaking `dialect`; None when it may."""
    if not sql.strip():
        return "The statement is empty."
    trees, why = _parsed(sql, dialect)
    if why:
        return why
    if len(trees) != 1:
        return (
            f"Only one statement may run at a time; this is {len(trees)}. Send each "
            "query on its own."
        )
    tree = trees[0]
    if isinstance(tree, exp.Command) and str(tree.this).upper() == "EXPLAIN":
        return _explain(tree, dialect)
    if not isinstance(tree, QUERY_ROOTS):
        return f"Only queries may run (SELECT, WITH, VALUES, EXPLAIN); this is {_kind(tree)}."
    return _inside(tree)


def _parsed(sql: str, dialect: str) -> tuple[list[exp.Expr], str | None]:
    logger = logging.getLogger("sqlglot")
    level = logger.level
    logger.setLevel(logging.ERROR)  # "falling back to a Command" is a refusal, not a warning
    try:
        trees = [t for t in sqlglot.parse(sql, read=dialect) if t is not None]
    except SqlglotError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return [], f"The statement could not be read as {dialect} SQL: {first[:300]}"
    finally:
        logger.setLevel(level)
    if not trees:
        return [], "The statement is empty (only comments or semicolons)."
    return trees, None


def _explain(tree: exp.Command, dialect: str) -> str | None:
    """EXPLAIN of a query; never EXPLAIN ANALYZE, which runs the statement."""
    text = f"EXPLAIN {tree.expression.name if tree.expression else ''}"
    match = EXPLAIN.match(text)
    rest = match.group("rest") if match else ""
    options = (match.group("options") if match else "").lower()
    if "analyze" in options or re.match(r"(analy[sz]e|verbose\s+analy[sz]e)\b", rest, re.I):
        return "EXPLAIN ANALYZE runs the statement; only a plain EXPLAIN may run."
    if not rest.strip():
        return "EXPLAIN needs a query to explain."
    return refusal(rest, dialect)


def _inside(tree: exp.Expr) -> str | None:
    """What within a query may not run: writes, locks, INTO, denied functions."""
    for node in tree.find_all(exp.Select):
        if node.args.get("locks"):
            return "Row locks (FOR UPDATE / FOR SHARE) are not allowed: they write."
        if node.args.get("into"):
            return "SELECT … INTO writes a table; only reading is allowed."
    if (found := tree.find(*WRITES)) is not None:
        return f"Only reading is allowed; the query contains {_kind(found)}."
    for func in tree.find_all(exp.Func):
        name = _function_name(func)
        if name in DENIED or name.startswith(DENIED_PREFIXES):
            return (
                f"The function {name}() is not allowed: it reaches files, programs, the "
                "network, other sessions or server state."
            )
    for table in tree.find_all(exp.Table):
        if _is_path(table.name):
            return f"Reading files by path ({table.name!r}) is not allowed; query tables."
    return None


def _function_name(func: exp.Func) -> str:
    if isinstance(func, exp.Anonymous):
        return str(func.name).lower()
    return func.sql_name().lower()


def _is_path(name: str) -> bool:
    """A table named like a file (DuckDB reads `FROM 'data.csv'`)."""
    return any(c in name for c in "/\\") or name.lower().endswith(FILE_ENDINGS)


def _kind(node: exp.Expr) -> str:
    if isinstance(node, exp.Command):
        return f"{str(node.this).upper()} (a command)"
    return f"{node.key.upper()} (a statement)"
