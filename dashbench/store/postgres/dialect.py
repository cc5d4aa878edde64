"""PostgreSQL's words for what the databases say differently (dialect.Dialect): upserts by ON CONFLICT,
many rows as one array per column, and the job queue's row lock."""

from __future__ import annotations

from dashbench.store.dialect import Dialect, marks


def array_text(kind: str, values) -> str:
    """A column's values as PostgreSQL's text of an array of `kind` ('{1,2.5,NULL}', '{"a\\"b"}'): a
    fifth of the client's CPU that psycopg's array dumper takes for a batch of 100 samples (it looks up
    each element's dumper). Floats in Python's shortest exact form, which the server reads back exactly."""
    if kind == "text":
        quoted = {
            v: "NULL" if v is None else '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'
            for v in set(values)
        }  # a batch's run id, quoted once
        return "{" + ",".join(map(quoted.__getitem__, values)) + "}"
    number = float if kind in ("double precision", "real") else int
    if None not in values:
        return "{" + ",".join(map(repr, map(number, values))) + "}"
    return "{" + ",".join("NULL" if v is None else repr(number(v)) for v in values) + "}"


class Postgres(Dialect):
    name = "postgresql"
    no_limit = "ALL"
    like = "ILIKE"

    @property
    def integrity_error(self):
        import psycopg

        return psycopg.errors.IntegrityError

    @staticmethod
    def upsert(table: str, columns, keys, rows: int = 1) -> str:
        update = ", ".join(f"{c} = EXCLUDED.{c}" for c in columns if c not in keys)
        return (
            f"INSERT INTO {table} ({', '.join(columns)}) VALUES {marks(len(columns), rows)}"
            f" ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {update}"
        )

    @classmethod
    def insert_rows(cls, table: str, columns, types, rows: list[tuple], replace_on=(), same=()) -> tuple[str, list]:
        if len(rows) == 1:
            return super().insert_rows(table, columns, types, rows, replace_on)
        # One array per column: a parameter each, whatever the rows (a statement of 600 parameters costs
        # psycopg more to convert than the server takes to run it), written as the array's text here. A
        # column of `same` whose rows all hold one value (a batch's run id) goes as that one value: the
        # server then copies one datum per row instead of reading an array of them, a third less of its
        # time for a batch of samples (the samples_need_runs check among it, migration 0011).
        values = list(zip(*rows))
        one = [name in same and len(set(column)) == 1 for name, column in zip(columns, values)]
        if all(one):  # unnest needs an array
            one[-1] = False
        arrays = [k for k in range(len(columns)) if not one[k]]
        picked = ", ".join(f"?::{types[k]}" if one[k] else f"u.c{k}" for k in range(len(columns)))
        sql = (
            f"INSERT INTO {table} ({', '.join(columns)}) SELECT {picked} FROM unnest("
            f"{', '.join(f'?::{types[k]}[]' for k in arrays)}) AS u({', '.join(f'c{k}' for k in arrays)})"
        )
        if replace_on:
            update = ", ".join(f"{c} = EXCLUDED.{c}" for c in columns if c not in replace_on)
            sql += f" ON CONFLICT ({', '.join(replace_on)}) DO UPDATE SET {update}"
        return sql, (
            [values[k][0] for k in range(len(columns)) if one[k]] + [array_text(types[k], values[k]) for k in arrays]
        )

    @staticmethod
    def insert_ignore(table: str, columns) -> str:
        return (
            f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
            " ON CONFLICT DO NOTHING"
        )

    @staticmethod
    def json_text(column: str, key: str) -> str:
        return f"({column}::json ->> '{key}')"

    @staticmethod
    def ends_with(column: str) -> str:
        return f"right({column}, ?) = ?"

    # A host's pump skips runs another host's pump has claimed in its open transaction, never waits on them.
    claim_rows = " FOR UPDATE OF runs SKIP LOCKED"


POSTGRES = Postgres()
