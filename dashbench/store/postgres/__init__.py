"""The store on a PostgreSQL server (a `postgresql+psycopg://` URL, a team's store): opening it (server.py),
its connections and write transactions (connection.py), a run's writes by libpq's own call (direct.py)."""
