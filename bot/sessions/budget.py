"""Budgets: what a run may spend, given the thread's and the user's day's spending so far."""

from __future__ import annotations

from dataclasses import dataclass

from bot.sessions.events import BudgetSpent
from bot.settings import Settings
from bot.store.base import Store

DAY_S = 86400


@dataclass(frozen=True)
class Budgets:
    run_usd: float = 2.0
    thread_usd: float = 10.0
    user_day_usd: float = 25.0

    @classmethod
    def from_settings(cls, settings: Settings) -> Budgets:
        return cls(
            settings.max_cost_usd_per_run,
            settings.max_cost_usd_per_thread,
            settings.max_cost_usd_per_user_day,
        )

    async def allowance(self, store: Store, key: str, user: str, now: float) -> float | BudgetSpent:
        """This run's allowance in USD, or why there is none. Continue allowances granted to
        the thread raise its budget."""
        session = await store.get_session(key)  # its cost is what its turns spent
        thread_limit = self.thread_usd + (session.granted_usd if session else 0.0)
        thread_spent = session.cost_usd if session else 0.0
        user_spent = await store.spent(user=user, since=now - now % DAY_S)
        if self.user_day_usd - user_spent <= 0:
            return BudgetSpent("user", user_spent, self.user_day_usd, 0.0)
        if thread_limit - thread_spent <= 0:
            return BudgetSpent("thread", thread_spent, thread_limit, self.run_usd)
        return min(self.run_usd, thread_limit - thread_spent, self.user_day_usd - user_spent)
