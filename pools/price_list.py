"""The price list shipped in the package (``pools/data/prices.yaml``): per model, dollars per million input and
output tokens, the source they come from and its date, and the model's published size where there is one.

The rule for a model's price, the same for every import and written once here (``fill_prices``): a price given
with ``--price`` wins; else the one the source file or its importer gave (RouteLLM's router evaluation, a
canonical line's ``generator_price``); else this list's, when it names the model. A model none of these prices
is *unpriced*: the pool then has no ``usd`` measure and ``--cost usd`` is refused in one line naming every
unpriced model (``coba_env.rules.config.check_cost_model_priced``); a source that recorded the dollars of every
call of a model (``candidates.cost_usd``) prices that model's calls itself. ``provenance.prices`` of the
manifest says, per model, where its price came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources

from pools.limits import MAX_PARAMS_B
from pools.prices import PRICES_KEY, price_problem
from pools.store import Pool
from pools.strict_yaml import load_yaml

__all__ = ["ListedModel", "fill_prices", "listed_model", "price_list", "price_list_sources"]


@dataclass(frozen=True)
class ListedModel:
    """One model of the shipped list: its prices ($ per million tokens), their source and date, its size."""

    name: str
    input: float
    output: float
    source: str
    date: str
    params_b: float | None = None

    @property
    def price(self) -> dict[str, float]:
        """The manifest form ``{"input": $/M, "output": $/M}``."""
        return {"input": self.input, "output": self.output}

    @property
    def cited(self) -> str:
        """Where the price comes from, for provenance and reports: ``shipped price list: <source>, <date>``."""
        return f"shipped price list (pools/data/prices.yaml): {self.source}, {self.date}"


def _read() -> tuple[dict[str, ListedModel], dict[str, dict[str, str]]]:
    """The list's models and sources, checked (a broken list is a packaging bug: ValueError naming the entry)."""
    text = resources.files("pools").joinpath("data/prices.yaml").read_text(encoding="utf-8")
    data = load_yaml(text)
    sources = data["sources"]
    models = {}
    for name, entry in data["models"].items():
        source = sources.get(entry.get("source"))
        problem = price_problem({k: entry.get(k) for k in ("input", "output")})
        size = entry.get("params_b")
        if source is None or problem or (size is not None and not 0 < size <= MAX_PARAMS_B):
            raise ValueError(f"pools/data/prices.yaml: model {name!r}: {problem or 'unknown source or bad params_b'}")
        models[str(name)] = ListedModel(str(name), float(entry["input"]), float(entry["output"]),
                                        str(source["what"]), str(source["date"]),
                                        None if size is None else float(size))
    return models, sources


@cache
def price_list() -> dict[str, ListedModel]:
    """Model name -> its entry in the shipped list (read once)."""
    return _read()[0]


def price_list_sources() -> dict[str, dict[str, str]]:
    """Source key -> ``{"what", "date"}`` of the shipped list."""
    return _read()[1]


def listed_model(name: str) -> ListedModel | None:
    """The shipped list's entry for model ``name`` (exact name), or None."""
    return price_list().get(name)


def fill_prices(pool: Pool, given: dict[str, dict[str, float]] | None = None) -> Pool:
    """``pool`` (changed in place) priced by the rule of the module doc: ``given`` (``--price``) over the
    source's prices over the shipped list's; ``provenance.prices`` names each priced model's origin and
    ``provenance.unpriced`` the models left without a price."""
    given = given or {}
    prices = dict(pool.manifest.get(PRICES_KEY) or {})
    origin = {m: "the source (or its importer)" for m in prices}
    for model in map(str, pool.models["name"]):
        listed = listed_model(model)
        if model in given:
            prices[model], origin[model] = given[model], "--price"
        elif model not in prices and listed is not None:
            prices[model], origin[model] = listed.price, listed.cited
    if prices:
        pool.manifest[PRICES_KEY] = prices
    provenance = pool.manifest.setdefault("provenance", {})
    if origin:
        provenance["prices"] = origin
    unpriced = [m for m in map(str, pool.models["name"]) if m not in prices]
    if unpriced and prices:
        provenance["unpriced"] = unpriced
    return pool
