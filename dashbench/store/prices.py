"""Prices, calibrations and first CPU probes: what a run's cost and MFU are judged by. The Store mixes this
part in."""

from __future__ import annotations

import json
import math

from dashbench.store import schema
from dashbench.store.ids import iso, now
from dashbench.store.retry import retried
from dashbench.store.runs import _insert

_PROBE_COLUMNS = ("host", "backend", "dtype", "tflops", "created_at", "run_id")


class PricesPart:
    """Price overrides, `doctor`'s calibrations, first CPU probes (mixed into Store)."""

    # -- price overrides (read by dashbench.costs) -----------------------------------------------

    def price_overrides(self) -> list[dict]:
        cols = schema.PRICE_COLUMNS
        rows = self._read(f"SELECT {', '.join(cols)} FROM price_overrides ORDER BY key")
        out = []
        for row in rows:
            item = dict(zip(cols, row))
            item["unconfirmed"] = bool(item["unconfirmed"])
            out.append(item)
        return out

    @retried
    def set_price_override(self, row: dict) -> None:
        unknown = sorted(set(row) - set(schema.PRICE_COLUMNS))
        if unknown:
            raise ValueError(f"{unknown[0]}: unknown price column; known: {', '.join(schema.PRICE_COLUMNS)}")
        for required in ("key", "device", "unit"):
            if not row.get(required):
                raise ValueError(f"{required}: is required for a price row")
        values = {c: row.get(c) for c in schema.PRICE_COLUMNS}
        values["unconfirmed"] = int(bool(values["unconfirmed"]))
        values["origin"] = "override"
        values["updated_at"] = now()
        with self._write("change a price") as conn:
            _insert(conn, "price_overrides", values, replace_on=("key",))

    @retried
    def delete_price_override(self, key: str) -> bool:
        with self._write("delete a price") as conn:
            return conn.execute("DELETE FROM price_overrides WHERE key = ?", (key,)).rowcount > 0

    @retried
    def reset_price_overrides(self) -> int:
        with self._write("reset prices") as conn:
            return conn.execute("DELETE FROM price_overrides").rowcount

    # -- calibrations (`dashbench doctor`) -------------------------------------------------------

    @retried
    def add_calibration(self, row: dict) -> int:
        """Store one verdict of `dashbench doctor`: host, device, backend, verdict (ok | warning |
        error) are required; versions, peaks ({dtype: TFLOP/s}), reasons and detail are JSON."""
        for required in ("host", "device", "backend", "verdict"):
            if not row.get(required):
                raise ValueError(f"{required}: is required for a calibration row")
        if row["verdict"] not in ("ok", "warning", "error"):
            raise ValueError(f"verdict: {row['verdict']!r} is not one of ok, warning, error")
        ratio = row.get("stopwatch_ratio")
        values = {
            "created_at": row.get("created_at") or now(),
            "host": row["host"],
            "device": row["device"],
            "accelerator": row.get("accelerator"),
            "backend": row["backend"],
            "versions_json": json.dumps(row.get("versions") or {}),
            "peaks_json": json.dumps({k: float(v) for k, v in (row.get("peaks") or {}).items() if v is not None}),
            "stopwatch_ratio": None if ratio is None else float(ratio),
            "verdict": row["verdict"],
            "reasons_json": json.dumps(list(row.get("reasons") or [])),
            "detail_json": json.dumps(row.get("detail") or {}, default=str),
        }
        with self._write("store a calibration") as conn:
            names = ", ".join(values)
            return conn.execute(
                f"INSERT INTO calibrations ({names}) VALUES ({', '.join('?' * len(values))}) RETURNING id",
                list(values.values()),
            ).fetchone()[0]

    def calibrations(
        self, host: str | None = None, device: str | None = None, backend: str | None = None, limit: int | None = None
    ) -> list[dict]:
        """Stored calibrations, newest first, optionally of one host, device kind and backend."""
        where, params = [], []
        for column, value in (("host", host), ("device", device), ("backend", backend)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        sql = f"SELECT id, {', '.join(schema.CALIBRATION_COLUMNS)} FROM calibrations"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at DESC, id DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [_calibration_dict(row) for row in self._read(sql, params)]

    def last_calibration(self, host: str, device: str | None = None, backend: str | None = None) -> dict | None:
        """The newest calibration of `host` (of one device kind and backend, when given), or None."""
        found = self.calibrations(host, device, backend, limit=1)
        return found[0] if found else None

    def best_cpu_peaks(self, host: str) -> dict[str, float]:
        """The best CPU matmul rate (TFLOP/s) this host's calibrations measured, per dtype, over
        every backend: the peak a CPU run on this host measures its MFU against. {} when none."""
        best: dict[str, float] = {}
        for row in self.calibrations(host, "cpu"):
            for dtype, value in row["peaks"].items():
                if isinstance(value, (int, float)) and value > 0 and value > best.get(dtype, 0.0):
                    best[dtype] = float(value)
        return best

    # -- the first CPU probe (the provisional peak before `doctor`) ------------------------------

    def first_cpu_peaks(self, host: str, backend: str) -> dict[str, float]:
        """The first CPU matmul rate (TFLOP/s) probed on `host` with `backend`, per dtype: the
        provisional peak its CPU runs share until a calibration exists. {} when none is stored."""
        rows = self._read("SELECT dtype, tflops FROM first_cpu_probes WHERE host = ? AND backend = ?", (host, backend))
        return {dtype: float(tflops) for dtype, tflops in rows}

    @retried
    def keep_first_cpu_peaks(self, host: str, backend: str, peaks: dict, run_id: str | None = None) -> dict[str, float]:
        """Store `peaks` ({dtype: TFLOP/s}) as the first probe of `host` on `backend` for each dtype
        that has none yet: a first probe stays, so every later run measures against the same peak.
        Returns the first probe as stored."""
        for dtype, value in peaks.items():
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"peaks: {dtype} must be a positive TFLOP/s figure, got {value!r}")
        with self._write("store the first CPU probe") as conn:
            for dtype, value in peaks.items():
                conn.execute(
                    conn.dialect.insert_ignore("first_cpu_probes", _PROBE_COLUMNS),
                    (host, backend, str(dtype), float(value), now(), run_id),
                )
        return self.first_cpu_peaks(host, backend)

    def first_cpu_probes(self) -> list[dict]:
        """Every stored first CPU probe ({host, backend, dtype, tflops, created_at, run_id}), by host,
        backend and dtype: what `store copy` carries as it is."""
        rows = self._read(f"SELECT {', '.join(_PROBE_COLUMNS)} FROM first_cpu_probes ORDER BY host, backend, dtype")
        return [dict(zip(_PROBE_COLUMNS, row)) for row in rows]

    @retried
    def add_first_cpu_probes(self, rows: list[dict]) -> int:
        """Store listed probes (first_cpu_probes' form) with their own created_at and run_id, each only
        where its host, backend and dtype have none yet: a first probe stays. Returns how many were added;
        a bad row is refused (one line naming the field) before anything is written."""
        values = [_probe_values(row) for row in rows]
        if not values:
            return 0
        added = 0
        with self._write("store first CPU probes") as conn:
            for row in values:
                added += conn.execute(conn.dialect.insert_ignore("first_cpu_probes", _PROBE_COLUMNS), row).rowcount
        return added


def _probe_values(row: dict) -> tuple:
    for name in ("host", "backend", "dtype"):
        if not isinstance(row.get(name), str) or not row[name]:
            raise ValueError(f"{name}: a first CPU probe needs a non-empty text, got {row.get(name)!r}")
    for name in ("tflops", "created_at"):
        value = row.get(name)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"{name}: a first CPU probe needs a positive number, got {value!r}")
    if row.get("run_id") is not None and not isinstance(row["run_id"], str):
        raise ValueError(f"run_id: a first CPU probe's run is a run id or empty, got {row['run_id']!r}")
    return tuple(float(row[c]) if c in ("tflops", "created_at") else row.get(c) for c in _PROBE_COLUMNS)


def _calibration_dict(row: tuple) -> dict:
    item = dict(zip(("id", *schema.CALIBRATION_COLUMNS), row))
    for column, default in (("versions_json", {}), ("peaks_json", {}), ("reasons_json", []), ("detail_json", {})):
        text = item.pop(column)
        try:
            value = json.loads(text) if text else default
        except ValueError:  # a damaged row reads as empty, never a crash
            value = default
        item[column[:-5]] = value if isinstance(value, type(default)) else default
    item["created"] = iso(item["created_at"])
    return item
