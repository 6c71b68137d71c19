"""Token usage as the Messages API reports it, summed over responses."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_5m_tokens: int = 0
    cache_write_1h_tokens: int = 0
    cache_read_tokens: int = 0

    @property
    def cache_write_tokens(self) -> int:
        return self.cache_write_5m_tokens + self.cache_write_1h_tokens

    @property
    def prompt_tokens(self) -> int:
        """The whole prompt: uncached input plus cache writes and reads."""
        return self.input_tokens + self.cache_write_tokens + self.cache_read_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    @classmethod
    def from_api(cls, usage: Any) -> Usage:
        """From an SDK `Usage`; missing fields (local servers) count as 0."""
        written = getattr(usage, "cache_creation_input_tokens", None) or 0
        split = getattr(usage, "cache_creation", None)
        w1h = (getattr(split, "ephemeral_1h_input_tokens", None) or 0) if split else 0
        return cls(
            input_tokens=getattr(usage, "input_tokens", None) or 0,
            output_tokens=getattr(usage, "output_tokens", None) or 0,
            cache_write_5m_tokens=written - w1h,
            cache_write_1h_tokens=w1h,
            cache_read_tokens=getattr(usage, "cache_read_input_tokens", None) or 0,
        )

    def to_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}
