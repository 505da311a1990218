"""The `costs:` block of an experiment: stated prices, each with its source, that turn what a run measured into money.

Nothing is priced without a stated price: a quantity a run measured whose price is not given is reported as
missing (and the total with it), never as zero (`retbench.results.costs`). A price says where it comes from
(`source`) and whether it is an example (`example: true`: a figure to show the mechanism, not a quote).

    costs:
      currency: USD
      cpu_second: {price: 0.0000236, source: "AWS c7i.large on-demand, us-east-1, $0.0850/h", example: true}
      index_gb_month: {price: 0.08, source: "AWS EBS gp3, us-east-1, per GB-month", example: true}
      systems:                      # per-system prices on top of (or instead of) the shared ones
        e5_api: {per_1k_input_tokens: {price: 0.00002, source: "...", example: true}}
"""

from __future__ import annotations

from pydantic import Field

from retbench.config.base import Block, NonNegativeFloat

#: the priced units, in the order reports list them
PRICE_KEYS = (
    "cpu_second",
    "gpu_second",
    "per_call",
    "per_1k_input_tokens",
    "per_1k_output_tokens",
    "index_gb_month",
)


class Price(Block):
    """One price per unit, with where it comes from."""

    price: NonNegativeFloat = Field(description="the price of one unit, in the block's currency")
    source: str = Field(min_length=1, description="where the figure comes from (a price list and its date)")
    example: bool = Field(False, description="true: an example figure, not a quote for this deployment")


class Prices(Block):
    """Prices per unit; a unit left out is unpriced (what it measured shows as missing, not as zero)."""

    cpu_second: Price | None = Field(None, description="a second of a CPU machine (stage wall time on CPU)")
    gpu_second: Price | None = Field(None, description="a second of a GPU machine (stage wall time on a GPU)")
    per_call: Price | None = Field(None, description="one call to a hosted API (a generate or judge call)")
    per_1k_input_tokens: Price | None = Field(None, description="1,000 input tokens sent to a hosted model")
    per_1k_output_tokens: Price | None = Field(None, description="1,000 output tokens from a hosted model")
    index_gb_month: Price | None = Field(None, description="a GB of saved index kept for a month")


class CostsBlock(Prices):
    """Shared prices, the currency, and per-system prices that win over the shared ones."""

    currency: str = Field("USD", min_length=1, description="the currency every price is in")
    systems: dict[str, Prices] = Field(default_factory=dict, description="system name -> its own prices")

    def for_system(self, name: str) -> dict[str, Price]:
        """The prices that apply to system `name`: its own, else the shared ones."""
        own = self.systems.get(name)
        out = {}
        for key in PRICE_KEYS:
            price = getattr(own, key, None) if own is not None else None
            price = price if price is not None else getattr(self, key)
            if price is not None:
                out[key] = price
        return out
