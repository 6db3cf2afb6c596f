"""The catalog rows a model was fitted with: kept in the model, merged with a catalog given later.

A fitted model carries itself to types nobody measured from catalog figures (``transfer``).
The rows of the types it measured travel with it (``kept_rows``; ``persist`` writes them into
the model file), so a catalog that only ``fit`` was given still serves ``predict`` and
``search``. A catalog given later adds the types it knows (``with_kept``); where it lists a
kept type, the figures the model uses must agree, else an InputError names the type and the
column. The embedded catalog is a default, not a statement about the user's machines: kept
rows take precedence over it without a conflict.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from srifty_kit.catalog.query import load_catalog
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


def conflicts(kept: pd.DataFrame, catalog: pd.DataFrame) -> list[tuple[str, str, object, object]]:
    """(instance type, column, the model's value, the catalog's value) wherever they differ."""
    given = catalog.drop_duplicates("instance_type").set_index(
        catalog.drop_duplicates("instance_type")["instance_type"].astype(str)
    )
    found = []
    for row in kept.itertuples(index=False):
        name = str(row.instance_type)
        if name not in given.index:
            continue
        for column in COMPARED:
            if column in given and _differs(getattr(row, column), given.at[name, column]):
                found.append((name, column, getattr(row, column), given.at[name, column]))
    return found


def with_kept(kept: pd.DataFrame | None, catalog: pd.DataFrame | None) -> pd.DataFrame:
    """The catalog a model predicts with: ``catalog`` (default: the embedded one) plus the kept
    rows, which fill in types the catalog lacks and take precedence over the embedded one.

    Raises:
        InputError: a catalog the user gave lists a kept type with other figures.
    """
    if catalog is None:
        catalog = load_catalog()
    if kept is None or kept.empty:
        return catalog
    embedded = str(catalog.attrs.get("source", "")).startswith(_EMBEDDED)
    if not embedded:
        found = conflicts(kept, catalog)
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
