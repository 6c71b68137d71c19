"""Data cards: what a data file holds (shape, column types, ranges, aggregate rows, malformed
records), computed in one streaming pass in bounded memory, for the model and for Slack."""

from bot.datacard.card import Aggregates, ColumnCard, DataCard, Malformed
from bot.datacard.detect import detect
from bot.datacard.errors import CardError
from bot.datacard.parquet import card_parquet
from bot.datacard.profiler import Profiler
from bot.datacard.render import cards_for_model, for_model, for_slack
from bot.datacard.stream import CardTap, gunzip
from bot.datacard.xlsx import card_xlsx

__all__ = [
    "Aggregates",
    "CardError",
    "CardTap",
    "ColumnCard",
    "DataCard",
    "Malformed",
    "Profiler",
    "card_parquet",
    "card_xlsx",
    "cards_for_model",
    "detect",
    "for_model",
    "for_slack",
    "gunzip",
]
