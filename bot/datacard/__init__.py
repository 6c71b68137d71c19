"""Data cards: what a data file holds (shape, column types, ranges, aggregate rows, malformed
records), computed in one streaming pass in bounded memory, for the model and for Slack."""

from bot.datacard.card import Aggregates, ColumnCard, DataCard, Malformed
from bot.datacard.errors import CardError
from bot.datacard.profiler import Profiler
from bot.datacard.stream import CardTap, gunzip

__all__ = [
    "Aggregates",
    "CardError",
    "CardTap",
    "ColumnCard",
    "DataCard",
    "Malformed",
    "Profiler",
    "gunzip",
]
