"""Prices' widgets: the catalog in use (shipped defaults and your overrides), and the published reference rows.

pages/prices.py only calls show(): a page file is compiled again for each visitor who finds no other session
open (Streamlit empties its script cache when the last one leaves), a module once per process (see compare/page.py)."""

from __future__ import annotations

import streamlit as st

from dashbench.core.spec import SpecError
from dashbench.costs import prices, reference
from dashbench.views.common.format import md_text
from dashbench.views.prices import tables as price_views
from dashbench.views.streamlit import ui


def show() -> None:
    """The page, top to bottom (st.stop() ends it early, as in a page file)."""
    ctx = ui.open_page("Prices", flash_key="price_flash")
    read_only = ctx.settings.read_only

    catalog = ui.shared(ctx, (), prices.catalog, ctx.store)  # one per store version, for every session
    st.caption(
        "Costs are derived when viewed, so a changed price re-prices every stored run. "
        "Shipped rows come from public sources (see `source`, `as_of`); overrides live in your database."
    )
    ui.table(ui.shared(ctx, (), price_views.catalog_table, catalog))

    if not read_only:
        st.subheader("Set a price")
        st.caption(
            "Same device, provider and unit as a shipped row replaces it; anything else adds a row. "
            "For this machine use device `CPU`, unit `hour`."
        )
        with st.form("price_form", clear_on_submit=False):
            cols = st.columns(3)
            device = cols[0].text_input("Device (e.g. V100, TPU v5e, CPU)", key="price_device")
            unit = cols[1].selectbox("Billing unit", prices.UNITS, key="price_unit")
            provider = cols[2].text_input("Provider", value="user", key="price_provider")
            cols = st.columns(3)
            on_demand = cols[0].number_input(
                "On-demand USD/hour", min_value=0.0, value=None, step=0.01, key="price_on_demand"
            )
            spot = cols[1].number_input(
                "Spot USD/hour (optional)", min_value=0.0, value=None, step=0.01, key="price_spot"
            )
            chips = cols[2].number_input("Chips or GPUs per unit", min_value=1, value=1, step=1, key="price_chips")
            source = st.text_input("Source (where the figure is from)", value="user override", key="price_source")
            if st.form_submit_button("Save price", key="price_save"):
                try:
                    row = prices.override_row(
                        device,
                        unit,
                        on_demand,
                        spot=spot,
                        chips=int(chips),
                        provider=provider,
                        source=source,
                        current=catalog,
                    )
                    ctx.store.set_price_override(prices.store_row(row))
                except (SpecError, ValueError) as exc:
                    st.error(f"Not saved: {md_text(exc)}")
                else:
                    st.session_state["price_flash"] = f"Saved price {md_text(row['key'])} for {md_text(row['device'])}."
                    st.rerun()

        overrides = catalog[catalog["origin"] == "override"]
        if not overrides.empty:
            st.subheader("Your overrides")
            cols = st.columns([3, 1, 1])
            key = cols[0].selectbox("Override", list(overrides["key"]), key="price_remove_key")
            if cols[1].button("Remove this override", key="price_remove"):
                ctx.store.delete_price_override(key)
                st.session_state["price_flash"] = (
                    f"Removed override {md_text(key)}; the shipped price (if any) applies again."
                )
                st.rerun()
            if cols[2].button("Reset all overrides", key="price_reset"):
                removed = ctx.store.reset_price_overrides()
                st.session_state["price_flash"] = (
                    f"Removed {removed} override{'' if removed == 1 else 's'}; shipped prices apply."
                )
                st.rerun()

    st.subheader("Published reference results")
    st.caption(
        "Figures from the seed articles and their sources. They appear on Compare as hatched grey "
        "bars, never mixed with measured runs, and can be used as a speed-up baseline."
    )
    ui.table(ui.memo((), price_views.reference_table, reference.rows()))  # the shipped rows: one per process
