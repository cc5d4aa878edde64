"""The store's schema history as alembic revisions (versions/NNNN_*.py), run by dashbench.store.migrate.

Revision NNNN takes a store to schema vNNNN: its id is the number, written with four digits, and its file
name starts with it. SQLite files also carry the number in `PRAGMA user_version`, PostgreSQL stores in
the `dashbench_schema` row: every dashbench, before alembic and after, reads the number there and refuses
a store newer than itself. 0001-0009 are the hand-written steps of dashbench before alembic, unchanged:
an SQLite file of any earlier version is stamped at its number and upgraded in place. A PostgreSQL store
starts at v9 (0001 makes v9's layout there; 0002-0009 have nothing to do on it).

A change to the schema is one new revision, the next number, that works on both databases:

    python -m dashbench.store.migrate revision "what the change does"

writes versions/NNNN_what_the_change_does.py from script.py.mako; fill in upgrade(). Use op.* with the
column types of `types()` below (TEXT, REAL, INTEGER as on SQLite; TEXT COLLATE "C", DOUBLE PRECISION,
BIGINT on PostgreSQL), and `with op.batch_alter_table(...)` for what SQLite's ALTER cannot do (it copies
the table). Nothing else to edit: schema.SCHEMA_VERSION is the newest file's number. Migrations only
move forward (no downgrade); every old store takes the same path a new one does, so it cannot rot.
"""

from __future__ import annotations

import re
from pathlib import Path

FOLDER = Path(__file__).resolve().parent
VERSIONS = FOLDER / "versions"
_FILE = re.compile(r"^(\d{4})_\w+\.py$")


def revision_id(number: int) -> str:
    """The alembic revision of schema v`number` ("0009"); None for an empty database (alembic's base)."""
    return f"{int(number):04d}" if number else None


def numbers() -> list[int]:
    """The schema versions the revision files make, in order (read from the file names: no import)."""
    return sorted(int(m.group(1)) for m in map(_FILE.match, (p.name for p in VERSIONS.iterdir())) if m)


def head_number() -> int:
    return numbers()[-1]


# -- for the revisions' bodies -------------------------------------------------------------------


def on_sqlite() -> bool:
    from alembic import op

    return op.get_bind().dialect.name == "sqlite"


def execute(*statements: str) -> None:
    """Run SQL as written (the driver's own parameters; no SQLAlchemy text(), so ':' is no bind)."""
    from alembic import op

    bind = op.get_bind()
    for statement in statements:
        if statement.strip():
            bind.exec_driver_sql(statement)


def rows(sql: str) -> list[tuple]:
    from alembic import op

    return [tuple(row) for row in op.get_bind().exec_driver_sql(sql)]


def execute_many(sql: str, params: list) -> None:
    from alembic import op

    if params:
        op.get_bind().exec_driver_sql(sql, params)


def types() -> dict:
    """The store's three column types, as each database spells them: TEXT compares byte by byte on
    PostgreSQL too ("C", as SQLite's does), and REAL is 8 bytes there (DOUBLE PRECISION)."""
    import sqlalchemy as sa
    from sqlalchemy.dialects import postgresql

    return {
        "TEXT": sa.Text().with_variant(sa.Text(collation="C"), "postgresql"),
        "REAL": sa.REAL().with_variant(postgresql.DOUBLE_PRECISION(), "postgresql"),
        "INTEGER": sa.Integer().with_variant(sa.BigInteger(), "postgresql"),
    }
