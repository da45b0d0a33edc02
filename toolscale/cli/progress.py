"""Signs of life where no bar can be drawn. On a terminal rich draws each command's bar; under
`make`, a pipe or a log file it draws nothing until the end, and a 16-minute SFT run looks dead.
There, a command prints a line every `TOOLSCALE_PROGRESS_EVERY` seconds (30 by default) — done of
total, the rate, the time left — to stderr, so what goes to stdout (JSON, tables) stays clean."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

DEFAULT_EVERY_S = 30.0


def interval() -> float:
    try:
        return max(0.0, float(os.environ.get("TOOLSCALE_PROGRESS_EVERY", DEFAULT_EVERY_S)))
    except ValueError:
        return DEFAULT_EVERY_S


def clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class ProgressLines:
    """`update(done, total)` as often as you like; a line is printed at most every interval, and at
    least every interval once something was done (a training step can take longer than the
    interval: the line then says the time gone by); `close()` prints the last one. Silent when the
    console is a terminal (its bar shows it)."""

    def __init__(self, label: str, unit: str = "", bar_console: Any = None, out: Any = None) -> None:
        from toolscale.cli.consoles import console, err_console

        self.label, self.unit, self.out = label, unit, out or err_console
        self.enabled = not (bar_console or console).is_terminal  # where the bar is drawn, no lines
        self.every = interval()
        self.started = self.last = time.monotonic()
        self.first_done: int | None = None
        self.done, self.total, self.detail = 0, None, ""
        self.printed_done: int | None = None
        self.lock, self.stopped = threading.Lock(), threading.Event()
        if self.enabled and self.every > 0:
            threading.Thread(target=self._tick, daemon=True).start()

    def update(self, done: int, total: int | None = None, detail: str = "") -> None:
        if self.first_done is None:
            self.first_done = done  # what a resumed run found done is not part of its rate
        self.done, self.total, self.detail = done, total if total is not None else self.total, detail
        if self.enabled and time.monotonic() - self.last >= self.every:
            self._print()

    def advance(self, n: int = 1) -> None:
        self.update(self.done + n, self.total, self.detail)

    def close(self) -> None:
        self.stopped.set()
        if self.enabled and self.printed_done != self.done and self.first_done is not None:
            self._print()

    def _tick(self) -> None:
        while not self.stopped.wait(self.every):
            if self.first_done is not None and time.monotonic() - self.last >= self.every:
                self._print()

    def line(self) -> str:
        elapsed = time.monotonic() - self.started
        fresh = self.done - (self.first_done or 0)
        rate = fresh / elapsed if elapsed > 0 else 0.0
        parts = [f"{self.label}: {self.done:,}" + (f"/{self.total:,}" if self.total else "") + self.unit]
        if self.total:
            parts.append(f"({100 * self.done / self.total:.0f}%)")
        if rate > 0:
            parts.append(f"{rate:.2f}/s" if rate < 10 else f"{rate:,.0f}/s")
        parts.append(f"elapsed {clock(elapsed)}")
        if self.total and rate > 0 and self.done < self.total:
            parts.append(f"ETA {clock((self.total - self.done) / rate)}")
        if self.detail:
            parts.append(self.detail)
        return " ".join(parts)

    def _print(self) -> None:
        with self.lock:
            self.out.print(self.line(), markup=False, soft_wrap=True)
            self.last, self.printed_done = time.monotonic(), self.done


# a bar's rate and time left are rich's, from the samples of this window: its default (30 s) holds
# fewer than two samples when a step takes longer (an SFT run logging every minute: `-:--:--` to the end)
SPEED_WINDOW_S = 3_600.0


def rate_column(unit: str) -> Any:
    """A bar column: the rate in `unit`s a second, or seconds a `unit` when slower than one a second."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    class Rate(ProgressColumn):  # type: ignore[misc]
        def render(self, task: Any) -> Text:
            speed = task.finished_speed or task.speed
            if not speed:
                return Text("")
            shown = f"{speed:.1f} {unit}/s" if speed >= 1 else f"{1 / speed:.1f} s/{unit}"
            return Text(shown, style="progress.data.speed")

    return Rate()
