"""The catalog rows a model was fitted with: kept in the model, merged with a catalog given later.

A fitted model carries itself to types nobody measured from catalog figures (``transfer``).
The rows of the types it measured travel with it (``kept_rows``; ``persist`` writes them into
the model file), so a catalog that only ``fit`` was given still serves ``predict`` and
``search``. A catalog given later adds the types it knows (``with_kept``); where it lists a
kept type, the figures the model uses must agree, else an InputError names the type and the
column. The embedded catalog is a default, not a statement about the user's machines: kept
rows take precedence over its packaged figures without a conflict. What decides is the content,
not the name a table carries: a copy of it edited after loading (``attrs`` travel with the
copy) states the user's figures wherever they differ from the packaged ones, and those are
checked as any catalog's.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from srifty_kit.catalog.query import embedded_regions, load_catalog
from srifty_kit.errors import InputError

# what a kept row holds: the figures the model reads (COMPARED) and what says where they are from
COMPARED = ("gpu_count", "gpu_fp32_tflops", "gpu_mem_bw_gbps", "network_gbps")
KEPT_COLUMNS = ("instance_type", "gpu_model", *COMPARED, "source")
_EMBEDDED = "embedded catalog"  # how catalog.query names its packaged tables (attrs["source"])


def kept_rows(catalog: pd.DataFrame | None, instance_types) -> pd.DataFrame:
    """The rows of ``instance_types`` that ``catalog`` lists, only the KEPT_COLUMNS, one per
    type (the first, when the catalog holds several regions)."""
    if catalog is None or "instance_type" not in catalog:
        return pd.DataFrame(columns=list(KEPT_COLUMNS))
    wanted = {str(t) for t in instance_types}
    names = catalog["instance_type"].astype(str)
    rows = catalog[names.isin(wanted)].drop_duplicates("instance_type")
    out = pd.DataFrame({c: rows[c] if c in rows else np.nan for c in KEPT_COLUMNS})
    return out.sort_values("instance_type").reset_index(drop=True)


def _differs(kept: object, given: object) -> bool:
    """Both known and not the same figure (text compared as text, numbers to 1e-9)."""
    if pd.isna(kept) or pd.isna(given):
        return False
    try:
        return not np.isclose(float(kept), float(given), rtol=1e-9, atol=0.0)
    except (TypeError, ValueError):
        return str(kept) != str(given)


def _first_row(names: np.ndarray, name: str) -> int | None:
    """Where ``name`` first appears in ``names`` (the row ``kept_rows`` keeps), else None."""
    hit = np.flatnonzero(names == name)
    return int(hit[0]) if hit.size else None


def conflicts(kept: pd.DataFrame, catalog: pd.DataFrame) -> list[tuple[str, str, object, object]]:
    """(instance type, column, the model's value, the catalog's value) wherever they differ."""
    # plain arrays, not an indexed frame: this runs on every catalog a prediction is given,
    # the embedded one included, and a few kept types need no index over the whole table
    names = catalog["instance_type"].astype(str).to_numpy()
    found = []
    given = {c: catalog[c].to_numpy() for c in COMPARED if c in catalog}
    for row in kept.to_dict("records"):
        name = str(row["instance_type"])
        at = _first_row(names, name)
        if at is None:
            continue
        for column, values in given.items():
            if _differs(row[column], values[at]):
                found.append((name, column, row[column], values[at]))
    return found


def with_kept(kept: pd.DataFrame | None, catalog: pd.DataFrame | None) -> pd.DataFrame:
    """The catalog a model predicts with: ``catalog`` (default: the embedded one) plus the kept
    rows, which fill in types the catalog lacks and take precedence over the embedded one.

    Args:
        kept: the model's catalog rows (``kept_rows``); None or empty: ``catalog`` as given.
        catalog: the catalog to merge them into (None: the embedded one).

    Returns:
        The merged table, with ``catalog``'s attrs.

    Raises:
        InputError: a catalog the user gave, or a copy of the embedded one edited after
            loading, lists a kept type with other figures (naming the type and the column).
    """
    if catalog is None:
        catalog = load_catalog()
    if kept is None or kept.empty:
        return catalog
    found = _edited(conflicts(kept, catalog), catalog)
    if found:
        name, column, ours, theirs = found[0]
        raise InputError(
            f"the catalog gives {column} {theirs} for {name!r}, but the model was fitted "
            f"with {ours}",
            source=catalog.attrs.get("source"),
            column=column,
            fix="give the catalog the model was fitted with, or refit with this one",
        )
    names = catalog["instance_type"].astype(str)
    kept = kept.set_index(kept["instance_type"].astype(str))
    both = catalog[names.isin(kept.index)].copy()
    for column in KEPT_COLUMNS[1:]:
        if column not in both:
            both[column] = np.nan
        ours = both["instance_type"].astype(str).map(kept[column])
        both[column] = ours.where(ours.notna(), both[column])
    only = kept[~kept.index.isin(names)].reset_index(drop=True)
    out = pd.concat(
        [frame for frame in (both, only, catalog[~names.isin(kept.index)]) if not frame.empty],
        ignore_index=True,
    )
    out.attrs = dict(catalog.attrs)
    return out


def _edited(found: list, catalog: pd.DataFrame) -> list:
    """The conflicts ``found`` that ``catalog`` states: all of them, but for a table named as
    the embedded one, only the figures that differ from the packaged table of their region
    (an unedited copy states nothing; an edited one states what was edited)."""
    if not found or not str(catalog.attrs.get("source", "")).startswith(_EMBEDDED):
        return found
    names = catalog["instance_type"].astype(str).to_numpy()
    packaged: dict[str, pd.DataFrame] = {}
    out = []
    for name, column, ours, theirs in found:
        region = str(catalog["region"].iat[_first_row(names, name)])
        if region in embedded_regions() and region not in packaged:
            table = load_catalog(region)
            packaged[region] = table.drop_duplicates("instance_type").set_index("instance_type")
        was = packaged.get(region)
        same = (
            was is not None
            and name in was.index
            and column in was
            and not pd.isna(was.at[name, column])
            and not _differs(was.at[name, column], theirs)
        )
        if not same:
            out.append((name, column, ours, theirs))
    return out


def speeds(rows: pd.DataFrame | None) -> dict[str, tuple[float, float]]:
    """(fp32 TFLOP/s, memory GB/s) per instance type of ``rows`` that lists both."""
    if rows is None or rows.empty:
        return {}
    out = {}
    for row in rows.itertuples(index=False):
        peak, bandwidth = (pd.to_numeric(getattr(row, c, np.nan)) for c in COMPARED[1:3])
        if np.isfinite(peak) and np.isfinite(bandwidth) and peak > 0 and bandwidth > 0:
            out[str(row.instance_type)] = (float(peak), float(bandwidth))
    return out
