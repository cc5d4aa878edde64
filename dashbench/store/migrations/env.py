"""alembic's environment for the store: always handed an open connection, inside the caller's transaction
and lock (dashbench.store.migrate), so alembic neither connects nor commits. No alembic.ini."""

from alembic import context


def run(connection) -> None:
    context.configure(
        connection=connection,
        # SQLite cannot ALTER most of a table: batch operations rebuild it (MLflow's choice too).
        render_as_batch=connection.dialect.name == "sqlite",
        transaction_per_migration=False,
    )
    with context.begin_transaction():
        context.run_migrations()


if getattr(context, "config", None) is not None:  # alembic runs this file; a plain import does nothing
    run(context.config.attributes["connection"])
