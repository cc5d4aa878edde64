"""A store's layout as plain data — tables, columns (type, null, default, order), indexes, foreign keys —
to compare a store made by this code with one made by an earlier commit (fixtures/store_schema_v9.json)."""

from __future__ import annotations

import sqlite3

# Bookkeeping of the migration tool, not the store's layout.
SKIP = ("alembic_version",)


def sqlite_layout(path) -> dict:
    conn = sqlite3.connect(path)
    try:
        tables = [name for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
            if name not in SKIP]
        out = {}
        for table in tables:
            columns = [list(row[1:]) for row in conn.execute(f"PRAGMA table_info({table})")]
            indexes = {}
            for _seq, name, unique, origin, partial in conn.execute(f"PRAGMA index_list({table})"):
                cols = [row[2] for row in conn.execute(f"PRAGMA index_info({name})")]
                indexes[name if origin == "c" else f"({origin}) {','.join(cols)}"] = [unique, cols, partial]
            keys = sorted(list(row[2:5]) + [row[6]] for row in conn.execute(f"PRAGMA foreign_key_list({table})"))
            out[table] = {"columns": columns, "indexes": indexes, "foreign_keys": keys}
        return out
    finally:
        conn.close()


def postgres_layout(url: str) -> dict:
    import sqlalchemy as sa

    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1), poolclass=sa.NullPool)
    try:
        with engine.connect() as conn:
            def rows(sql):
                return [list(r) for r in conn.exec_driver_sql(sql)]

            out = {}
            for (table,) in rows("SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1"):
                if table in SKIP:
                    continue
                columns = rows(
                    "SELECT column_name, data_type, collation_name, is_nullable, column_default, is_identity"
                    f" FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = '{table}'"
                    " ORDER BY ordinal_position")
                indexes = {name: definition for name, definition in rows(
                    f"SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema()"
                    f" AND tablename = '{table}'")}
                constraints = sorted(rows(
                    "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint"
                    f" WHERE conrelid = '{table}'::regclass"))
                out[table] = {"columns": columns, "indexes": indexes, "constraints": constraints}
            return out
    finally:
        engine.dispose()
