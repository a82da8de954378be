"""The live view on stderr: simulated time, replicas local vs external, gate state, spend rate,
and events as they happen. A rich ``Live`` panel on a terminal; plain event lines otherwise
(CI logs, pipes), so nothing is lost when nobody watches.
"""

from __future__ import annotations

import time
from collections import deque
from types import TracebackType

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from vkprovider.sim.record import Sample
from vkprovider.sim.scenario import Scenario
from vkprovider.sim.timeline import Change, gate_words, sim_clock

STATUS_EVERY_SECONDS = 30.0


class LiveView:
    def __init__(self, s: Scenario, *, console: Console | None = None, enabled: bool = True) -> None:
        self.s = s
        self.console = console or Console(stderr=True)
        self.enabled = enabled
        self.day_start = time.time()
        self.sample: Sample | None = None
        self.spent = 0.0  #: simulated money billed so far
        self.events: deque[str] = deque(maxlen=12)
        self._live: Live | None = None
        self._last_status = 0.0
        self.gate = True  #: False: no gate runs, so the taint's absence means nothing

    def gate_text(self, sample: Sample) -> str:
        return gate_words(sample.gate_tainted) if self.gate else "not running"

    def __enter__(self) -> LiveView:
        if self.enabled and self.console.is_terminal:
            self._live = Live(self._render(), console=self.console, refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._live is not None:
            self._live.update(self._render())
            self._live.__exit__(exc_type, exc, tb)
            self._live = None

    def start_day(self, t: float) -> None:
        self.day_start = t

    def say(self, message: str) -> None:
        """A line outside the panel (start-up progress)."""
        if self.enabled:
            self.console.print(message, highlight=False, markup=False, soft_wrap=True)

    def event(self, change: Change) -> None:
        line = f"{sim_clock(self.s, self.day_start, change.t)}  {change.kind:<14} {change.subject:<12} {change.detail}"
        self.events.append(line)
        if self.enabled and self._live is None:
            self.console.print(line, highlight=False, markup=False, soft_wrap=True)

    def update(self, sample: Sample, spent: float) -> None:
        self.sample, self.spent = sample, spent
        if self._live is not None:
            self._live.update(self._render())
        elif self.enabled and sample.t - self._last_status >= STATUS_EVERY_SECONDS:
            self._last_status = sample.t
            self.console.print(self._status_line(sample), highlight=False, markup=False, soft_wrap=True)

    def _status_line(self, sample: Sample) -> str:
        local = sum(w.local for w in sample.workloads.values())
        external = sum(w.external for w in sample.workloads.values())
        return (
            f"{sim_clock(self.s, self.day_start, sample.t)}  status         replicas local {local} external {external}, "
            f"spend {sample.spend_rate:.2f}/h, spent ${self.spent:,.2f}, gate: {self.gate_text(sample)}"
        )

    def _render(self) -> Panel:
        sample = self.sample
        now = sample.t if sample else time.time()
        elapsed = max(0.0, now - self.day_start)
        share = min(1.0, elapsed / self.s.clock.real_seconds)
        bar = "#" * int(share * 40) + "." * (40 - int(share * 40))
        header = Text(
            f"{sim_clock(self.s, self.day_start, now)} of {self.s.clock.day / 3600:g}h  [{bar}]  "
            f"real {elapsed:.0f}s / {self.s.clock.real_seconds:g}s",
            style="bold",
        )
        table = Table(expand=False)
        for column in ("workload", "desired", "local", "external", "ready", "pending"):
            table.add_column(column, justify="left" if column == "workload" else "right")
        parts: list[Text | Table] = [header]
        if sample is not None:
            for name, w in sample.workloads.items():
                table.add_row(
                    name, str(w.desired), str(w.local), str(w.external), str(w.ready), str(w.pending)
                )
            parts.append(table)
            training = ", ".join(
                f"{n}: {t.running} running / {t.pending} pending ({t.gpus} GPUs)"
                + (f" [{t.state}]" if t.state else "")
                for n, t in sample.training.items()
                if t.running or t.pending or t.state in ("queued", "admitted")
            )
            if sample.queue_gpus is not None:
                training += f"   (queue quota {sample.queue_gpus} GPUs)"
            parts.append(Text(f"training: {training or 'none'}"))
            parts.append(Text(f"local GPUs schedulable {sample.local_gpus}, in use {sample.local_gpus_used}"))
            parts.append(Text(f"gate: {self.gate_text(sample)}"))
            by_provider = (
                ", ".join(f"{p} {n}" for p, n in sorted(sample.external_by_provider.items())) or "none"
            )
            parts.append(
                Text(
                    f"external: {by_provider}   spend rate {sample.spend_rate:.2f}/h   spent ${self.spent:,.2f}"
                )
            )
        parts.append(Text("events:", style="bold"))
        parts.extend(Text(line) for line in self.events)
        return Panel(Group(*parts), title=f"simulation: {self.s.name}")
