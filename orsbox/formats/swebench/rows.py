"""Reading a SWE-style dataset from disk: one row is one task.

A dataset is a `.jsonl`, `.json` or `.parquet` file, or a folder saved by the `datasets`
library (`Dataset.save_to_disk`: `state.json` naming `data-*.arrow` files in Arrow's
stream format; a `DatasetDict` folder holds one such folder per split). All of them are
read with the standard library and pyarrow, so loading needs neither the network nor
the `datasets` package.

Every problem is a `ManifestError` naming the file, the row and the field.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orsbox.errors import ManifestError

JSONRow = dict[str, Any]


@dataclass(frozen=True)
class Row:
    """One row as read, with where it came from (for messages) and its split."""

    data: JSONRow
    source: str
    index: int
    split: str

    def where(self) -> str:
        instance = self.data.get("instance_id") or self.data.get("docker_image")
        named = f" ({instance})" if isinstance(instance, str) else ""
        return f"{self.source}: row {self.index}{named}"

    def error(self, problem: str) -> ManifestError:
        return ManifestError(f"{self.where()}: {problem}")


def read_rows(path: Path, split: str | None = None) -> list[Row]:
    """Every row of the dataset at `path`. The split is `split` when given, else the
    row's `split` column, else the file's (or a `DatasetDict` folder's) name."""
    if path.is_dir():
        return _read_folder(path, split)
    if not path.is_file():
        raise ManifestError(f"{path}: no such file or folder")
    records = _read_file(path)
    return [_row(record, str(path), i, path.stem, split) for i, record in enumerate(records)]


def _row(record: object, source: str, index: int, default: str, forced: str | None) -> Row:
    if not isinstance(record, dict):
        raise ManifestError(f"{source}: row {index}: a row is an object, not {_kind(record)}")
    column = record.get("split")
    split = forced or (column if isinstance(column, str) and column else default)
    return Row(record, source, index, split)


def _read_file(path: Path) -> Sequence[object]:
    suffix = path.suffix.lower()
    try:
        if suffix == ".jsonl":
            return _read_jsonl(path)
        if suffix == ".json":
            return _read_json(path)
        if suffix == ".parquet":
            return _read_parquet(path)
    except OSError as e:
        raise ManifestError(f"{path}: cannot read it: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise ManifestError(f"{path}: not UTF-8 text (byte {e.start})") from None
    raise ManifestError(f"{path}: not a dataset (.jsonl, .json, .parquet or a datasets folder)")


def _read_jsonl(path: Path) -> list[object]:
    rows = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise ManifestError(f"{path}: line {number}: not JSON: {e.msg}") from None
    return rows


def _read_json(path: Path) -> list[object]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ManifestError(f"{path}: not JSON: {e.msg} (line {e.lineno})") from None
    if isinstance(data, dict) and isinstance(data.get("data"), list):
        return data["data"]
    if not isinstance(data, list):
        raise ManifestError(f"{path}: a JSON dataset is a list of rows, not {_kind(data)}")
    return data


def _read_parquet(path: Path) -> list[dict[str, Any]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.read_table(path).to_pylist()
    except pa.ArrowException as e:
        raise ManifestError(f"{path}: not a Parquet file: {e}") from None


def _read_folder(path: Path, split: str | None) -> list[Row]:
    """A `save_to_disk` folder: a `Dataset` (state.json) or a `DatasetDict` (one
    Dataset folder per split, listed in dataset_dict.json)."""
    if (path / "state.json").is_file():
        return _read_arrow_dataset(path, path.name, split)
    listing = path / "dataset_dict.json"
    if listing.is_file():
        splits = _json_file(listing).get("splits", [])
        return [row for name in splits for row in _read_arrow_dataset(path / name, name, split)]
    raise ManifestError(
        f"{path}: not a dataset folder (no state.json or dataset_dict.json from "
        "datasets' save_to_disk)"
    )


def _read_arrow_dataset(folder: Path, default: str, forced: str | None) -> list[Row]:
    import pyarrow as pa

    files = [
        entry.get("filename") for entry in _json_file(folder / "state.json").get("_data_files", [])
    ]
    rows: list[Row] = []
    for name in files:
        arrow = folder / str(name)
        try:
            with pa.memory_map(str(arrow)) as source:
                records = pa.ipc.open_stream(source).read_all().to_pylist()
        except (OSError, pa.ArrowException) as e:
            raise ManifestError(f"{arrow}: cannot read it as Arrow data: {e}") from None
        rows += [_row(r, str(arrow), i, default, forced) for i, r in enumerate(records)]
    return rows


def _json_file(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise ManifestError(f"{path}: cannot read it: {e}") from None
    if not isinstance(data, dict):
        raise ManifestError(f"{path}: expected a JSON object")
    return data


def _kind(value: object) -> str:
    names: dict[type, str] = {dict: "an object", list: "a list", str: "a string"}
    return names.get(type(value), type(value).__name__)


# -- fields ------------------------------------------------------------------------------
def text_field(row: Row, name: str, *, required: bool = True) -> str:
    """A string field; missing or empty is an error when `required`."""
    value = row.data.get(name)
    if value is None or value == "":
        if required:
            raise row.error(f"missing required field {name!r}")
        return ""
    if not isinstance(value, str):
        raise row.error(f"field {name!r} must be a string, not {_kind(value)}")
    return value


def test_ids(row: Row, name: str) -> list[str]:
    """`FAIL_TO_PASS` / `PASS_TO_PASS`: a list of test ids, or the same list as a
    JSON-encoded string (as the dataset hubs store them)."""
    if name not in row.data or row.data[name] is None:
        raise row.error(f"missing required field {name!r}")
    value = row.data[name]
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except json.JSONDecodeError as e:
            raise row.error(f"field {name!r} is not a JSON list: {e.msg}") from None
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise row.error(f"field {name!r} must be a list of test ids (strings)")
    return value


def json_field(row: Row, name: str) -> Any:
    """An object that may be stored as JSON text (`install_config`, expected outputs)."""
    value = row.data.get(name)
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as e:
            raise row.error(f"field {name!r} is not valid JSON: {e.msg}") from None
    return value
