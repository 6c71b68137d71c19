"""The Show work and Notebook buttons under an answer (block_kit.work_buttons). Both read the
store only, so any replica answers them, before or after a restart, whether or not it
runs the thread.

Show work opens a modal (show_work.py) with the click's trigger_id, which Slack honours for
3 seconds: the listener acks first, and the path to views.open is two store reads. A
refused open (an expired trigger, say) is logged: the click came too late to show
anything, and nothing else is wrong. Notebook uploads the thread's .ipynb into it; a
failure is told to the clicker privately. Who may press either is the policy's, as for
the feedback and Continue buttons.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence

from bot.sessions.notebook_store import (
    CHART_MAX_BYTES,
    CHARTS_MAX,
    is_png,
    notebook_text,
    thread_notebook,
)
from bot.slack.listen.files import SlackFiles
from bot.slack.listen.policy import Policy
from bot.slack.render import block_kit, show_work, wording
from bot.slack.threads import Click, ThreadRef
from bot.slack.view.chart_files import ChartFiles
from bot.slack.web import SlackWeb
from bot.slack.web.errors import SlackError
from bot.store.base import RunRecord, Store, ToolCallRecord

log = logging.getLogger(__name__)


class WorkButtons:
    def __init__(
        self, web: SlackWeb, store: Store | None, policy: Policy, files: SlackFiles | None = None
    ) -> None:
        self.web, self.store, self.policy, self.files = web, store, policy, files
        self.chart_files = ChartFiles(store)

    async def show_work(self, run_id: str, trigger_id: str, click: Click) -> None:
        """Open the Show work modal for the run the button is under."""
        if self.store is None or await self._refused(click):
            return
        run = await self._run_here(run_id, click)
        if run is None:
            return
        calls = [c for c in await self.store.tool_calls(run.key) if c.run_id == run_id]
        try:
            await self.web.open_view(trigger_id, show_work.modal(run, calls))
        except SlackError as exc:
            log.warning("could not open Show work for run %s: %s", run_id, exc.code or exc)

    async def notebook(self, run_id: str, click: Click) -> None:
        """Upload the thread's notebook into it; a failure is told to the clicker."""
        if self.store is None or await self._refused(click):
            return
        try:
            run = await self._run_here(run_id, click)
            if run is not None:
                await self._upload(run)
        except Exception:  # the store, Slack or the notebook itself: say so, privately
            log.exception("could not upload the notebook of run %s", run_id)
            await self.web.ephemeral(
                click.channel, click.user, wording.NOTEBOOK_FAILED, click.thread_ts
            )

    async def _upload(self, run: RunRecord) -> None:
        assert self.store is not None
        ref = ThreadRef.parse(run.key)
        if ref is None:
            raise LookupError(f"run {run.run_id!r} is not a Slack thread's")
        charts = functools.partial(self._charts, ref)
        text = await notebook_text(await thread_notebook(self.store, run.key, charts))
        item = block_kit.upload(f"{ref.ts}.ipynb", text.encode())
        await self.web.upload(ref.channel, ref.ts, [item], None)

    async def _charts(self, ref: ThreadRef, _steps: Sequence[ToolCallRecord]) -> dict[str, bytes]:
        """The charts the bot shared in the thread, by name: the files whose ids it kept
        when it uploaded them (a PNG someone else shared, whatever its name, is not one);
        any that cannot be fetched are left out of the notebook."""
        ours = await self.chart_files.ids(ref.key)
        if self.files is None or not ours:
            return {}
        charts: dict[str, bytes] = {}
        try:
            shared = await self.web.thread_files(ref.channel, ref.ts)
        except SlackError as exc:
            log.warning("could not list the files of thread %s: %s", ref.key, exc.code)
            return {}
        pngs = [f for f in shared if f.get("id") in ours]
        for file in pngs[:CHARTS_MAX]:
            if file.get("size", 0) > CHART_MAX_BYTES:
                continue
            try:
                data = b"".join([chunk async for chunk in self.files.stream(file)])
            except Exception as exc:  # one chart fewer in the notebook
                log.warning("could not fetch %s for the notebook: %s", file.get("name"), exc)
                continue
            if is_png(data):
                charts[ours[file["id"]]] = data
        return charts

    async def _run_here(self, run_id: str, click: Click) -> RunRecord | None:
        """The run the button names, when it is a run of the thread clicked in; else the
        clicker is told, privately, and nothing of the run is shown."""
        assert self.store is not None
        run = await self.store.get_run(run_id) if run_id else None
        if run is None or not click.in_thread(run.key):
            await self.web.ephemeral(
                click.channel, click.user, wording.NOT_THIS_THREAD, click.thread_ts
            )
            return None
        return run

    async def _refused(self, click: Click) -> bool:
        refusal = self.policy.refusal(click.channel, click.user)
        if refusal:
            await self.web.ephemeral(click.channel, click.user, refusal, click.thread_ts)
        return refusal is not None
