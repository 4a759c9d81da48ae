"""The base of every node tool's parameter model: bounded, and nothing unknown accepted."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")
