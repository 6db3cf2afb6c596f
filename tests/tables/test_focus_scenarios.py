"""FOCUS exports written after the FOCUS specification's published scenarios (a savings plan at
100/75/0% utilisation, purchases with all, partial or no upfront, a correction with no
quantity, credits, tax, a second currency, another provider's VM, bad cells), in each FOCUS
version's column names, checked figure by figure against hand-computed values; and a property:
the reconciliation equals the plain sum of the week's rows to the cent, per currency and charge
category, for any generated ledger."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from srifty_kit.catalog.query import load_catalog
from srifty_kit.present.weekly import (
    TRAINING,
    UNKNOWN_GPUS,
    commitment_table,
    compute_split,
    reconciliation_table,
    sanity_checks,
)
from srifty_kit.tables.ledger import DuckDBLedger, jobs_of_week, weekly_usage
from srifty_kit.tables.usage_sql import FEE, PURCHASE, UNUSED

WEEK = dt.date(2026, 11, 23)
DAY = "2026-11-24T00:00:00Z"
CATALOG = load_catalog()
AZURE_GPU = pd.DataFrame({"instance_type": ["Standard_NC24ads_A100_v4"], "gpu_count": [1]})


def row(**values) -> dict:
    base = {
        "ChargePeriodStart": DAY,
        "ChargePeriodEnd": "2026-11-24T01:00:00Z",
        "BillingCurrency": "USD",
        "ChargeCategory": "Usage",
        "ChargeClass": None,
        "ProviderName": "AWS",
        "ServiceCategory": "Compute",
        "ServiceName": "Amazon Elastic Compute Cloud",
        "ConsumedQuantity": None,
        "ConsumedUnit": None,
        "BilledCost": 0.0,
        "EffectiveCost": 0.0,
        "ListCost": None,
        "ContractedCost": None,
        "CommitmentDiscountId": None,
        "CommitmentDiscountStatus": None,
        "CommitmentDiscountType": None,
        "PricingCategory": "Standard",
        "InstanceType": None,  # goes where the version puts it (see write)
        "Tags": "{}",
    }
    return {**base, **values}


SP = {"CommitmentDiscountId": "sp-1", "CommitmentDiscountType": "Savings Plan"}
HOUR = {"ConsumedQuantity": 1.0, "ConsumedUnit": "Hours"}


def scenario() -> list[dict]:
    """One day of a week: a $10/hour savings plan 75% used, its recurring fee, an Azure GPU
    VM, a correction of earlier usage with no quantity, a credit, tax, storage, a row with
    malformed JSON cells, and usage and tax in EUR."""
    return [
        # covered usage: billed 0 (the fee bills it), effective 7.50, list 32.77
        row(**HOUR, **SP, InstanceType="p4d.24xlarge", EffectiveCost=7.5, ListCost=32.77,
            CommitmentDiscountStatus="Used", PricingCategory="Committed",
            Tags=json.dumps({"team": "nlp", "job": "bert"})),
        # the unused 25%: effective 2.50 of waste, no quantity, the unit filled (as some do)
        row(**SP, ConsumedUnit="Hours", EffectiveCost=2.5, CommitmentDiscountStatus="Unused",
            PricingCategory="Committed"),
        # the recurring fee (no upfront): billed 10, effective 0
        row(**SP, ChargeCategory="Purchase", BilledCost=10.0, ServiceName="Savings Plans"),
        # another provider's GPU VM, tagged with the names this org uses
        row(ProviderName="Microsoft", ServiceName="Virtual Machines", ConsumedQuantity=2.0,
            ConsumedUnit="Hours", InstanceType="Standard_NC24ads_A100_v4", BilledCost=7.35,
            EffectiveCost=7.35, ListCost=7.35,
            Tags=json.dumps({"business_unit": "vision", "application": "detector"})),
        # a correction of closed-period usage: negative, no quantity (the spec allows it)
        row(ChargeClass="Correction", InstanceType="g5.xlarge", BilledCost=-3.0,
            EffectiveCost=-3.0, ListCost=-3.0, Tags=json.dumps({"team": "nlp", "job": "bert"})),
        row(ChargeCategory="Credit", ServiceCategory="Other", ServiceName="Credits",
            BilledCost=-20.0, EffectiveCost=-20.0),
        row(ChargeCategory="Tax", ServiceCategory="Other", ServiceName="Tax", BilledCost=4.1,
            EffectiveCost=4.1),
        row(ServiceCategory="Storage", ServiceName="Amazon Simple Storage Service",
            ConsumedQuantity=50.0, ConsumedUnit="GB-Mo", BilledCost=1.25, EffectiveCost=1.25,
            Tags="NULL"),
        # bad cells: malformed Tags and SKU details; the row still counts, flagged
        row(**HOUR, InstanceType="BROKEN", BilledCost=1.006, EffectiveCost=1.006,
            Tags='{"team": "nlp"'),
        row(**HOUR, BillingCurrency="EUR", InstanceType="g5.xlarge", BilledCost=0.93,
            EffectiveCost=0.93, ListCost=0.93,
            Tags=json.dumps({"business_unit": "research", "application": "llm"})),
        row(ChargeCategory="Tax", BillingCurrency="EUR", ServiceCategory="Other",
            ServiceName="Tax", BilledCost=0.18, EffectiveCost=0.18),
    ]  # fmt: skip


VERSIONS = ("1.0", "1.1", "1.2", "1.3")


def write(rows: list[dict], path, version: str = "1.2"):
    """``rows`` as a FOCUS ``version`` CSV: 1.0 has no SkuPriceDetails (AWS's 1.0 export names
    the instance type in x_UsageType); 1.3 names the provider ServiceProviderName."""
    frame = pd.DataFrame(rows)
    types = frame.pop("InstanceType")

    def sku(t):
        if t == "BROKEN":
            return '{"InstanceType": '
        return json.dumps({"InstanceType": t}) if isinstance(t, str) else "{}"

    if version == "1.0":
        frame["x_UsageType"] = ["USE1-BoxUsage:" + t if isinstance(t, str) else None for t in types]
        frame.loc[types == "BROKEN", "x_UsageType"] = None
    else:
        frame["SkuPriceDetails"] = [sku(t) for t in types]
    if version == "1.3":
        frame = frame.rename(columns={"ProviderName": "ServiceProviderName"})
    frame = frame.astype(object).where(frame.notna(), "NULL")  # as real exports write nulls
    frame.to_csv(path, index=False)
    return path


@pytest.fixture(scope="module", params=VERSIONS)
def week(request, tmp_path_factory):
    path = write(scenario(), tmp_path_factory.mktemp("focus") / "focus.csv", request.param)
    tags = {"team": ("team", "business_unit"), "job": ("job", "application")}
    return weekly_usage(DuckDBLedger(path), WEEK, tags)


def figures(table: pd.DataFrame, *keys: str) -> dict:
    return {
        tuple(r[k] for k in keys): (
            r["rows"],
            round(r["billed_cost"], 6),
            round(r["effective_cost"], 6),
        )
        for _, r in table.iterrows()
    }


def test_every_row_is_reconciled_by_currency_and_charge_category(week):
    got = figures(reconciliation_table(week), "currency", "charge_category")
    assert got == {
        ("EUR", "Usage"): (1, 0.93, 0.93),
        ("EUR", "Tax"): (1, 0.18, 0.18),
        ("USD", "Usage"): (6, 6.606, 16.606),  # 0+0+7.35-3+1.25+1.006; 7.5+2.5+...
        ("USD", "Purchase"): (1, 10.0, 0.0),
        ("USD", "Credit"): (1, -20.0, -20.0),
        ("USD", "Tax"): (1, 4.1, 4.1),
    }
    # the commitment's fee is billed; amortised into usage it gives the same week's total
    usd = reconciliation_table(week).query("currency == 'USD'")
    assert usd["billed_cost"].sum() == pytest.approx(0.706)
    assert usd["effective_cost"].sum() == pytest.approx(0.706)
    corrections = reconciliation_table(week).set_index(["currency", "charge_category"])
    assert corrections.loc[("USD", "Usage"), "corrections"] == 1


def test_training_compute_is_gpu_instance_usage_of_any_provider_and_the_rest_says_why(week):
    split = compute_split(week, CATALOG, AZURE_GPU)
    training = split[(split["currency"] == "USD") & (split["part"] == TRAINING)]
    by_provider = training.groupby("provider")[["effective_cost", "billed_cost"]].sum()
    assert by_provider.loc["AWS", "effective_cost"] == pytest.approx(7.5 - 3.0)
    assert by_provider.loc["Microsoft", "effective_cost"] == pytest.approx(7.35)
    assert set(training["service"]) == {"Amazon Elastic Compute Cloud", "Virtual Machines"}
    assert training["effective_cost"].sum() == pytest.approx(11.85)
    assert training["billed_cost"].sum() == pytest.approx(4.35)
    # every part adds up to the reconciliation, currency by currency
    whole = reconciliation_table(week)
    for currency, parts in split.groupby("currency"):
        total = whole[whole["currency"] == currency]
        assert parts["rows"].sum() == total["rows"].sum()
        assert parts["billed_cost"].sum() == pytest.approx(total["billed_cost"].sum())
    reasons = set(split["part"])
    assert UNUSED in reasons and "unusable instance usage: missing instance type" in reasons
    # without a catalog for the Azure type its GPUs are unknown, and named so
    plain = compute_split(week, CATALOG)
    unknown = plain[plain["part"] == UNKNOWN_GPUS]
    assert unknown["types"].tolist() == ["Standard_NC24ads_A100_v4"]
    assert unknown["provider"].tolist() == ["Microsoft"]


def test_commitments_utilisation_coverage_waste_and_savings_rate(week):
    usd = commitment_table(week).set_index("currency").loc["USD"]
    assert usd["used_commitment"] == pytest.approx(7.5)
    assert usd["unused_commitment"] == pytest.approx(2.5)
    assert usd["utilisation"] == pytest.approx(0.75)
    assert usd["purchases_billed"] == pytest.approx(10.0)
    # covered 32.77 of 32.77 + 7.35 - 3.00 at on-demand prices
    assert usd["coverage"] == pytest.approx(32.77 / 37.12)
    # (list - effective - unused) / list = (37.12 - 11.85 - 2.50) / 37.12
    assert usd["effective_savings_rate"] == pytest.approx(22.77 / 37.12)


def test_unused_commitment_and_corrections_are_no_job_and_untagged_cost_no_team(week):
    jobs = jobs_of_week(week.lines).set_index("job")
    assert "(untagged)" not in jobs.index
    assert jobs.loc["bert", "effective_cost"] == pytest.approx(4.5)  # 7.50 - 3.00 correction
    assert jobs.loc["bert", "instance_hours"] == pytest.approx(1.0)  # the correction adds none
    assert jobs.loc["detector", "team"] == "vision"  # --tag team=business_unit
    assert set(week.lines["currency"]) == {"USD", "EUR"}


def test_bad_cells_and_spec_checks_land_in_the_data_quality_table(week):
    checks = sanity_checks(week, compute_split(week, CATALOG)).set_index("check")
    assert checks.loc["tags cell is not valid JSON (read as untagged)", "rows"] == 1
    unusable = checks.loc["unusable: missing instance type"]
    assert unusable["rows"] == 1 and unusable["cost"] == pytest.approx(1.006)
    assert "Standard_NC24ads_A100_v4" in checks.loc["unknown GPU count", "detail"]
    # the week's rows add up: quality of the week = reconciliation rows
    assert week.quality["rows"].sum() == week.rows == 11


@pytest.mark.parametrize(
    ("change", "check"),
    [
        ({"EffectiveCost": 40.0}, "effective cost above list cost"),
        ({"BilledCost": "inf", "EffectiveCost": "inf"}, "cost cell is not a finite number"),
    ],
)
def test_suspicious_costs_are_flagged_not_summed(tmp_path, change, check):
    rows = scenario()
    rows[0] = {**rows[0], **change}
    week = weekly_usage(DuckDBLedger(write(rows, tmp_path / "f.csv")), WEEK)
    checks = sanity_checks(week, compute_split(week, CATALOG))
    assert checks["check"].str.startswith(check).any()
    assert np.isfinite(reconciliation_table(week)[["billed_cost", "effective_cost"]]).all().all()


def test_costs_rounded_to_whole_units_are_flagged(tmp_path):
    rows = [
        row(**HOUR, InstanceType="g5.xlarge", BilledCost=float(c), EffectiveCost=float(c))
        for c in (1, 2, 3, 4, 5, 6)
    ]
    week = weekly_usage(DuckDBLedger(write(rows, tmp_path / "f.csv")), WEEK)
    checks = set(sanity_checks(week, compute_split(week, CATALOG))["check"])
    assert {"EffectiveCost looks rounded", "BilledCost looks rounded"} <= checks


# --------------------------------------------------------------------------- the property

CATEGORIES = ("Usage", "usage", "Purchase", "Tax", "Credit", "Adjustment")
cells = st.fixed_dictionaries(
    {
        "day": st.integers(-3, 10),  # some rows before and after the week
        "currency": st.sampled_from(["USD", "EUR", "JPY"]),
        "category": st.sampled_from(CATEGORIES),
        "cents": st.integers(-(10**7), 10**7),
        "null_cost": st.booleans(),
        "service": st.sampled_from(["Amazon Elastic Compute Cloud", "Virtual Machines", "S3"]),
        "quantity": st.one_of(st.none(), st.floats(-2, 24, allow_nan=False)),
        "status": st.sampled_from([None, "Used", "Unused"]),
        "itype": st.sampled_from([None, "g5.xlarge", "Standard_D4s_v5", "BROKEN"]),
    }
)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=st.lists(cells, min_size=1, max_size=40), version=st.sampled_from(VERSIONS))
def test_the_reconciliation_is_the_plain_sum_of_the_weeks_rows_to_the_cent(tmp_path, rows, version):
    ledger = [
        row(
            ChargePeriodStart=(pd.Timestamp(WEEK) + pd.Timedelta(days=r["day"])).strftime(
                "%Y-%m-%dT%H:%M:%SZ"
            ),
            BillingCurrency=r["currency"],
            ChargeCategory=r["category"],
            ServiceName=r["service"],
            ConsumedQuantity=r["quantity"],
            ConsumedUnit="Hours",
            CommitmentDiscountStatus=r["status"],
            InstanceType=r["itype"],
            BilledCost=None if r["null_cost"] else r["cents"] / 100,
            EffectiveCost=r["cents"] / 100,
        )
        for r in rows
    ]
    path = write(ledger, tmp_path / "p.csv", version)
    try:
        week = weekly_usage(DuckDBLedger(path), WEEK)
    except Exception as err:  # only "every row unusable" may refuse, and as an InputError
        assert type(err).__name__ == "InputError" and "no usable rows" in str(err)
        return
    # the independent reading: pandas over the same file, no SQL
    raw = pd.read_csv(path, keep_default_na=False, dtype=str)
    start = pd.to_datetime(raw["ChargePeriodStart"], utc=True).dt.tz_localize(None)
    raw = raw[(start >= pd.Timestamp(WEEK)) & (start < pd.Timestamp(WEEK) + pd.Timedelta(7, "D"))]
    raw = raw.assign(
        category=raw["ChargeCategory"].str.capitalize(),
        billed=pd.to_numeric(raw["BilledCost"], errors="coerce").fillna(0.0),
        effective=pd.to_numeric(raw["EffectiveCost"], errors="coerce").fillna(0.0),
    )
    want = raw.groupby(["BillingCurrency", "category"]).agg(
        rows=("billed", "size"), billed=("billed", "sum"), effective=("effective", "sum")
    )
    got = reconciliation_table(week).set_index(["currency", "charge_category"])
    assert sorted(got.index) == sorted(want.index)
    for key, expected in want.iterrows():
        assert got.loc[key, "rows"] == expected["rows"]
        assert abs(got.loc[key, "billed_cost"] - expected["billed"]) < 0.005, key
        assert abs(got.loc[key, "effective_cost"] - expected["effective"]) < 0.005, key
    assert week.quality["rows"].sum() == len(raw)


def commitment_hour(used: float, upfront: float, recurring: float) -> list[dict]:
    """One hour of a $10/hour savings plan: ``used`` of it covering usage (the rest unused),
    an upfront payment billed in the week (all or partial upfront) and a recurring fee."""
    rows = [row(**SP, ChargeCategory="Purchase", BilledCost=upfront)] if upfront else []
    if recurring:
        rows.append(row(**SP, ChargeCategory="Purchase", BilledCost=recurring))
    if used:
        rows.append(
            row(**HOUR, **SP, InstanceType="p4d.24xlarge", EffectiveCost=used, ListCost=32.77,
                CommitmentDiscountStatus="Used", PricingCategory="Committed")
        )  # fmt: skip
    if used < 10:
        rows.append(row(**SP, EffectiveCost=10 - used, CommitmentDiscountStatus="Unused"))
    return rows


def test_a_purchase_of_no_commitment_is_a_fee_and_not_the_commitments(tmp_path):
    support = row(
        ChargeCategory="Purchase", BilledCost=100.0, EffectiveCost=100.0, ServiceName="Support"
    )
    rows = [*commitment_hour(10.0, 0.0, 10.0), support]
    week = weekly_usage(DuckDBLedger(write(rows, tmp_path / "c.csv")), WEEK)
    split = compute_split(week, CATALOG).set_index("part")
    assert split.loc[FEE, "billed_cost"] == 100.0 and split.loc[FEE, "effective_cost"] == 100.0
    assert split.loc[PURCHASE, "billed_cost"] == 10.0  # the savings plan's fee
    c = commitment_table(week).set_index("currency").loc["USD"]
    assert c["purchases_billed"] == pytest.approx(10.0) and c["utilisation"] == 1.0
    r = reconciliation_table(week).set_index("charge_category")
    assert r.loc["Purchase", "billed_cost"] == pytest.approx(110.0)


@pytest.mark.parametrize(
    ("used", "upfront", "recurring", "utilisation", "billed"),
    [
        (10.0, 0.0, 10.0, 1.0, 10.0),  # 100% used, no upfront
        (7.5, 0.0, 10.0, 0.75, 10.0),  # 75% used
        (0.0, 0.0, 10.0, 0.0, 10.0),  # 0% used: all of it waste
        (10.0, 87600.0, 0.0, 1.0, 87600.0),  # all upfront: a year bought in this week
        (10.0, 43800.0, 5.0, 1.0, 43805.0),  # partial upfront
    ],
)
def test_commitment_scenarios_by_utilisation_and_payment(
    tmp_path, used, upfront, recurring, utilisation, billed
):
    rows = commitment_hour(used, upfront, recurring)
    week = weekly_usage(DuckDBLedger(write(rows, tmp_path / "c.csv")), WEEK)
    c = commitment_table(week).set_index("currency").loc["USD"]
    assert c["utilisation"] == pytest.approx(utilisation)
    assert c["unused_commitment"] == pytest.approx(10 - used)
    assert c["purchases_billed"] == pytest.approx(billed)
    r = reconciliation_table(week).set_index("charge_category")
    assert r.loc["Purchase", "billed_cost"] == pytest.approx(billed)
    assert r.loc["Purchase", "effective_cost"] == 0  # billed, not effective
    assert r.loc["Usage", "effective_cost"] == pytest.approx(10.0)  # the hour, amortised
    split = compute_split(week, CATALOG).set_index("part")
    waste = split.loc[UNUSED, "effective_cost"] if UNUSED in split.index else 0.0
    assert waste == pytest.approx(10 - used)
    training = split.loc[TRAINING, "effective_cost"] if TRAINING in split.index else 0.0
    assert training == pytest.approx(used)
