"""Running one cell of the kernel: the namespace, the display of the last expression,
tracebacks without the kernel's frames, charts, and the per-cell limits.
Copied into the sandbox with `sci_kernel`; standard library only (`sci_kernel_charts`
reads a saved chart's data).
"""

from __future__ import annotations

import ast
import contextlib
import importlib.abc
import importlib.machinery
import linecache
import os
import resource
import sys
import traceback
import types
from typing import Any

import sci_kernel_chart_kinds
import sci_kernel_charts

KERNEL_DIR = os.path.dirname(os.path.abspath(__file__))


class Cells:
    """Runs cells in one namespace: a module named __main__, so `if __name__ == "__main__"`
    and pickling behave as in a script. The last expression's value is shown."""

    def __init__(self, charts: Charts) -> None:
        self.main = types.ModuleType("__main__")
        sys.modules["__main__"] = self.main
        self.charts = charts
        self.count = 0
        self.running = False  # True while user code runs: only then does SIGINT interrupt

    def run(self, source: str) -> tuple[int, bool]:
        """(exit code, interrupted) of one cell; errors are printed to stderr."""
        self.count += 1
        name = f"<cell-{self.count}>"
        linecache.cache[name] = (len(source), None, source.splitlines(True), name)
        self.running = True
        try:
            self._execute(source, name)
            self.running = False
            return 0, False
        except SystemExit as exc:
            self.running = False
            return _exit_code(exc), False
        except KeyboardInterrupt as exc:
            self.running = False
            _print_error(exc)
            return 130, True
        except BaseException as exc:
            self.running = False
            _print_error(exc)
            return 1, False
        finally:
            self.running = False
            self.charts.flush(save=False)

    def _execute(self, source: str, name: str) -> None:
        try:
            tree = ast.parse(source, name)
        except SyntaxError as exc:
            raise exc.with_traceback(None) from None
        last = None
        tail = tree.body[-1] if tree.body else None
        if isinstance(tail, ast.Expr) and not source.rstrip().endswith(";"):
            tree.body.pop()
            last = ast.Expression(tail.value)
        namespace = self.main.__dict__
        exec(compile(tree, name, "exec"), namespace)
        if last is not None:
            value = eval(compile(last, name, "eval"), namespace)
            if value is not None:
                sys.displayhook(value)
        self.charts.flush()


class Charts:
    """plt.show(), and figures still open when a cell ends, save PNG files to the out folder
    (the sandbox's Agg backend can show nothing); figures saved with savefig are not saved
    twice. Every figure saved to a file, by either, gets its chart file beside it
    (`sci_kernel_charts`)."""

    def __init__(self, out_dir: str) -> None:
        self.out_dir = out_dir
        self.saved = 0
        # Figure.savefig is wrapped as matplotlib.figure is imported, so a figure saved
        # without pyplot (Figure(), a library's own) is recorded too; pyplot.show on its own.
        hooks = {"matplotlib.figure": self._patch_figure, "matplotlib.pyplot": self._patch_pyplot}
        sys.meta_path.insert(0, _ImportHook(hooks))

    def _patch_pyplot(self, pyplot: types.ModuleType) -> None:
        def show(
            *args: Any, **kwargs: Any
        ) -> None:  # a plain function: pyplot sets its __signature__
            self.flush()

        setattr(pyplot, "show", show)  # noqa: B010  (a module attribute the type checker cannot see)

    @staticmethod
    def _patch_figure(module: types.ModuleType) -> None:
        figure = module.Figure
        savefig = figure.savefig

        def marked(fig: Any, *args: Any, **kwargs: Any) -> Any:
            fig._kernel_saved = True
            result = savefig(fig, *args, **kwargs)
            fname = args[0] if args else kwargs.get("fname")
            sci_kernel_charts.record(fig, fname, kwargs.get("format"))
            return result

        figure.savefig = marked
        axes = sys.modules["matplotlib.axes"].Axes  # imported by matplotlib.figure
        pie = axes.pie

        def kept_pie(ax: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
            drawn = pie(ax, x, *args, **kwargs)
            sci_kernel_chart_kinds.keep_pie_values(drawn[0], x, kwargs.get("data"))
            return drawn

        axes.pie = kept_pie

    def flush(self, save: bool = True) -> None:
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is None or not hasattr(pyplot, "close"):
            return
        for number in pyplot.get_fignums() if save else ():
            figure = pyplot.figure(number)
            if figure.get_axes() and not getattr(figure, "_kernel_saved", False):
                path = self._next_path()
                figure.savefig(path, bbox_inches="tight")
                print(f"[figure saved to {path}]")
        pyplot.close("all")

    def _next_path(self) -> str:
        os.makedirs(self.out_dir, exist_ok=True)
        while True:
            self.saved += 1
            path = os.path.join(self.out_dir, f"figure-{self.saved}.png")
            if not os.path.exists(path):
                return path


class _ImportHook(importlib.abc.MetaPathFinder):
    """Calls `hooks[name]` with the module `name` as soon as it has been imported."""

    def __init__(self, hooks: Any) -> None:
        self.hooks = hooks

    def find_spec(self, name: Any, path: Any, target: Any = None) -> Any:
        on_import = self.hooks.get(name)
        if on_import is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader, on_import)
        return spec


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: Any, on_import: Any) -> None:
        self.inner, self.on_import = inner, on_import

    def create_module(self, spec: Any) -> Any:
        return self.inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.inner.exec_module(module)
        # a matplotlib unlike the one expected is imported all the same
        with contextlib.suppress(Exception):
            self.on_import(module)


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


def _print_error(exc: BaseException) -> None:
    """The traceback without the kernel's own frames."""
    report = traceback.TracebackException(type(exc), exc, exc.__traceback__)
    frames = [frame for frame in report.stack if not _ours(frame.filename)]
    report.stack = traceback.StackSummary.from_list(frames)
    sys.stderr.write("".join(report.format()))


def _ours(filename: str) -> bool:
    name = os.path.basename(filename)
    return os.path.dirname(filename) == KERNEL_DIR and name.startswith("sci_kernel")


def cpu_budget(seconds: int) -> None:
    """RLIMIT_CPU counts a process's whole life: give each cell `seconds` more."""
    if seconds:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
        soft = int(usage.ru_utime + usage.ru_stime) + 1 + seconds
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def cap_memory(share: float) -> None:
    """A soft RLIMIT_DATA below the machine's memory: MemoryError instead of the OOM killer."""
    limit = int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") * share)
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    if soft == resource.RLIM_INFINITY or limit < soft:
        resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
