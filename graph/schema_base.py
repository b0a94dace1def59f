"""The base class of the reward agent's pydantic records (`graph.schemas`, `graph.inspection_schemas`), in a module of
its own so that both can import it (`graph.schemas` re-exports every record of `graph.inspection_schemas`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Record(BaseModel):
    """A record that ignores keys it does not declare (a model's reply may carry extra ones)."""

    model_config = ConfigDict(extra="ignore")
