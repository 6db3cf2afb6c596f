"""The EC2 catalog: loading the embedded (or a refreshed) table, and pure queries over it.

Like SkyPilot's catalog, fetching lives elsewhere (``catalog.aws``); everything here is a
function of a DataFrame, so it works the same on the embedded table, a refreshed file or a
three-row frame built in a test.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Sequence
from importlib import resources

import numpy as np
import pandas as pd

from srifty_kit.errors import InputError, did_you_mean
from srifty_kit.tables.contracts import validate_catalog
from srifty_kit.tables.files import read_table

DEFAULT_REGION = "us-east-1"
_DATA_PACKAGE = "srifty_kit.data"
_FILE_PREFIX, _FILE_SUFFIX = "ec2_catalog_", ".csv"
# how AWS names a region: us-east-1, eu-central-2, ap-southeast-4, us-gov-west-1
_REGION_NAME = re.compile(
    r"^[a-z]{2}(-gov|-iso[a-z]?)?-(north|south|east|west|central|"
    r"northeast|northwest|southeast|southwest)-\d{1,2}$"
)

# Columns beyond the contract (contracts.CATALOG) that the embedded table and a refresh both carry.
EXTRA_COLUMNS = (
    "family",  # the part of the instance type before the dot: g5, p4d, c7i
    "category",  # accelerated | cpu
    "accelerator_kind",  # GPU | Neuron | empty for CPU types
    "gpu_compute_capability",  # CUDA compute capability (NVIDIA only)
    "network_is_up_to",  # the advertised figure is burstable ("Up to N Gigabit")
    "network_baseline_gbps",  # sustained bandwidth summed over network cards
    "spot_price_basis",  # how spot_usd_per_hr was obtained (measured median or derived)
    "offered_in_region",  # DescribeInstanceTypeOfferings lists it in the region
)


def embedded_regions() -> list[str]:
    """Regions whose catalog ships inside the package."""
    names = (p.name for p in resources.files(_DATA_PACKAGE).iterdir())
    return sorted(
        n[len(_FILE_PREFIX) : -len(_FILE_SUFFIX)]
        for n in names
        if n.startswith(_FILE_PREFIX) and n.endswith(_FILE_SUFFIX)
    )


@functools.lru_cache(maxsize=4)
def _embedded(region: str) -> pd.DataFrame:
    resource = resources.files(_DATA_PACKAGE) / f"{_FILE_PREFIX}{region}{_FILE_SUFFIX}"
    if not resource.is_file():
        regions = embedded_regions()
        # region names differ by design in a letter or two: a well-formed one (eu-west-1,
        # us-east-2) is another region, not a typo of us-east-1; only a malformed one is
        hint = "" if _REGION_NAME.match(region) else did_you_mean(region, regions)
        raise InputError(
            f"no embedded EC2 catalog for region {region!r}{hint}; embedded: {', '.join(regions)}",
            # `path` is load_catalog's argument, --catalog on the command line (api_flags)
            fix=f"run `srifty catalog refresh --region {region} --out catalog.csv` and give "
            "that file as `path`",
        )
    with resources.as_file(resource) as path:
        table = read_table(path)
    table.attrs["source"] = f"embedded catalog {resource.name}"
    return validate_catalog(table)


def load_catalog(
    region: str | None = DEFAULT_REGION, path: str | os.PathLike | None = None
) -> pd.DataFrame:
    """The EC2 catalog of ``region``: the embedded one, or the table in ``path`` (validated).

    With ``path``, ``region=None`` keeps every row of the file; a region the file lacks is an
    InputError naming the regions it has. A file name given as the region
    (``load_catalog("x.csv")``) is an InputError saying to pass it as ``path``, and so is an
    empty name (``--region ""`` is refused alike).
    """
    _check_region(region)
    if path is None:
        return _embedded(region or DEFAULT_REGION).copy()
    table = validate_catalog(read_table(path))
    if region is None:
        return table
    rows = table["region"] == region
    if not rows.any():
        have = sorted(table["region"].unique())
        raise InputError(
            f"no rows for region {region!r}; the file holds {', '.join(have)}",
            source=str(path),
            column="region",
            fix=f"give `region` {have[0]}, or refresh the catalog for {region}",
        )
    out = table[rows].reset_index(drop=True)
    out.attrs = dict(table.attrs)
    return out


def _check_region(region: object) -> None:
    """A region is a name such as us-east-1; a path or anything else is refused, saying so."""
    if region is None:
        return
    text = os.fspath(region) if isinstance(region, str | os.PathLike) else None
    if text is None or not text.strip():  # '' read as "the default region", silently
        raise InputError(
            "region must be a name such as 'us-east-1', got "
            + (repr(region) if isinstance(region, str) else type(region).__name__),
            fix="load_catalog(region='us-east-1'), or load_catalog(path=FILE) for a file",
        )
    if not isinstance(region, str) or names_a_file(text):
        raise InputError(
            f"{text!r} was given as the region, but it names a file (did you mean path={text!r}?)",
            fix=f"load_catalog(path={text!r}) (region=None keeps every region of the file)",
        )


def names_a_file(text: str) -> bool:
    """Whether a region argument is a file's name instead (a separator, a table's suffix, or
    an existing file): the catalog's path given in the region's place."""
    return (
        os.sep in text
        or os.path.splitext(text)[1].lower() in (".csv", ".parquet", ".json", ".gz")
        or os.path.isfile(text)
    )


def instance_family(instance_type: pd.Series) -> pd.Series:
    """The instance family of each type: the part before the dot (g5, p4d, c7i)."""
    return instance_type.astype(str).str.split(".", n=1).str[0]


def offered(rows: pd.DataFrame) -> pd.Series:
    """Whether each catalog row's type is still offered in its region (``offered_in_region``;
    an empty cell, or a catalog without the column, counts as offered): what a search of the
    catalog enumerates, and what a panel marks as retired where a family has none."""
    if "offered_in_region" not in rows:
        return pd.Series(True, index=rows.index)
    return rows["offered_in_region"].fillna(True).astype(bool)


def _as_list(value: str | Iterable[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _match(
    values: pd.Series, wanted: str | Iterable[str], what: str, source: str | None
) -> np.ndarray:
    """Case-insensitive membership; a name matching nothing is an InputError with a hint."""
    text = values.astype("string").str.lower()
    present = sorted({str(v) for v in values.dropna()})
    mask = np.zeros(len(values), bool)
    for name in _as_list(wanted):
        hit = (text == str(name).strip().lower()).fillna(False).to_numpy()
        if not hit.any():
            raise InputError(
                f"unknown {what} {name!r}{did_you_mean(name, present)}",
                source=source,
                fix=f"use one of {', '.join(present)}",
            )
        mask |= hit
    return mask


def filter_catalog(
    catalog: pd.DataFrame,
    *,
    gpu: str | Iterable[str] | None = None,
    family: str | Iterable[str] | None = None,
    min_gpu_mem_gib: float | None = None,
) -> pd.DataFrame:
    """Rows with any of the GPU models, in any of the families, with at least that GPU memory."""
    keep = np.ones(len(catalog), bool)
    src = catalog.attrs.get("source")
    if gpu is not None:
        keep &= _match(catalog["gpu_model"], gpu, "GPU model", src)
    if family is not None:
        keep &= _match(instance_family(catalog["instance_type"]), family, "instance family", src)
    if min_gpu_mem_gib is not None:
        mem = pd.to_numeric(catalog["gpu_memory_gib"], errors="coerce").to_numpy(float)
        keep &= np.nan_to_num(mem, nan=-np.inf) >= float(min_gpu_mem_gib)
    out = catalog[keep].reset_index(drop=True)
    out.attrs = dict(catalog.attrs)
    return out


def _positions(catalog: pd.DataFrame, instance_types: Sequence[str]) -> np.ndarray:
    """Row position of each type; an unknown or ambiguous type is an InputError."""
    index = pd.Index(catalog["instance_type"].astype(str))
    if not index.is_unique:
        dup = index[index.duplicated()][0]
        raise InputError(
            f"instance type {dup!r} appears more than once (several regions?)",
            source=catalog.attrs.get("source"),
            fix="select one region first: load_catalog(region=...)",
        )
    wanted = pd.Index(np.asarray(instance_types, dtype=object).astype(str))
    pos = index.get_indexer(wanted)
    if (pos < 0).any():
        name = str(wanted[np.flatnonzero(pos < 0)[0]])
        raise InputError(
            f"instance type {name!r} is not in the catalog{did_you_mean(name, index)}",
            source=catalog.attrs.get("source"),
            fix="see `srifty catalog show`, or refresh the catalog",
        )
    return pos


def lookup(
    catalog: pd.DataFrame, instance_types: Sequence[str], columns: Sequence[str]
) -> pd.DataFrame:
    """The catalog's ``columns`` for each of ``instance_types`` (repeats allowed), in order."""
    pos = _positions(catalog, instance_types)
    return catalog[list(columns)].iloc[pos].reset_index(drop=True)


def _price_column(spot: bool) -> str:
    return "spot_usd_per_hr" if spot else "ondemand_usd_per_hr"


def hourly_prices(
    catalog: pd.DataFrame, instance_types: Sequence[str], spot: bool = False
) -> np.ndarray:
    """USD per hour of each instance type (vectorised); NaN where the catalog has no price."""
    col = _price_column(spot)
    values = catalog[col].to_numpy(dtype=float, na_value=np.nan)
    return values[_positions(catalog, instance_types)]


def hourly_price(catalog: pd.DataFrame, instance_type: str, spot: bool = False) -> float:
    """USD per hour of one instance type, on-demand or spot; a missing price is an InputError."""
    price = float(hourly_prices(catalog, [instance_type], spot)[0])
    if np.isnan(price):
        kind = "spot" if spot else "on-demand"
        raise InputError(
            f"the catalog has no {kind} price for {instance_type!r}",
            source=catalog.attrs.get("source"),
            column=_price_column(spot),
            fix="refresh the catalog (`srifty catalog refresh`) or use the other pricing",
        )
    return price


def instance_row(catalog: pd.DataFrame, instance_type: str) -> pd.Series:
    """Every column of one instance type's row."""
    return catalog.iloc[int(_positions(catalog, [instance_type])[0])]
