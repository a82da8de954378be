"""``timeline.png``: the chart a person would draw to explain the system.

Every line comes from :func:`series`, a pure function of the recording (samples for what the
apiserver showed, ledgers for what the providers billed), which the tests check value by value.

Top: inference replicas as stacked areas: local (samples), then per provider the deployments
its ledger was billing (so a replica still being created is counted from its create), then
external pods no ledger entry covered yet ("being placed"); the desired count (dashed), Ready
replicas, desired - Ready shaded red, the PDB floor (dotted); training jobs as shaded bands
(through Kueue: admitted to finished, hatched while queued), maintenance and outage windows as
bands, other events as dotted lines, and the spend rate (ledgers) on a second axis. Below it the
traffic: requests per second answered locally and by each provider, failed requests marked
(:func:`vkprovider.sim.traffic.traffic_series`, from the load generator's records). Then the
cumulative spend against the ideal's (the lower bound). Bottom strip: the gate's state. The x
axis is the simulated clock.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import itertools
from dataclasses import dataclass, field

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.patches import Patch

from vkprovider.sim.costs import spend_rate
from vkprovider.sim.ideal import policies
from vkprovider.sim.record import LedgerEntry, Recording
from vkprovider.sim.scenario import Scenario
from vkprovider.sim.traffic import NoTraffic, traffic_series

LOCAL_COLOUR = "#2e8b57"
PROVIDER_COLOURS = ["#f39c12", "#d35400", "#c0392b", "#8e44ad", "#7f8c8d"]
PLACING_COLOUR = "#95a5a6"
SHORT_COLOUR = "#e74c3c"
EVENT_LABELS = {"capacity": "capacity", "scale": "scale"}
#: (start kind, end kind, label, colour) of the windows drawn as bands
WINDOWS = (
    ("cordon", "uncordon", "maintenance", "#7f8c8d"),
    ("outage-start", "outage-end", "outage", "#c0392b"),
)


class EmptyRecording(ValueError):
    """Nothing was sampled during the day: there is no chart to draw."""


@dataclass
class Series:
    """Everything the chart draws, one value per sample of the day."""

    hours: list[float] = field(default_factory=list)  #: simulated clock
    local: list[int] = field(default_factory=list)
    external: dict[str, list[int]] = field(default_factory=dict)  #: provider -> billing deployments
    placing: list[int] = field(default_factory=list)  #: external pods beyond the ledgers' entries
    desired: list[int] = field(default_factory=list)
    ready: list[int] = field(default_factory=list)
    floor: list[int] = field(default_factory=list)  #: sum of the PDB floors at the desired counts
    spend_rate: list[float] = field(default_factory=list)  #: $/h, ledgers
    spent: list[float] = field(default_factory=list)  #: simulated $ so far, ledgers
    ideal_spent: list[float] = field(default_factory=list)  #: simulated $ so far, the ideal
    windows: list[tuple[str, str, float, float]] = field(default_factory=list)  #: (label, subject, x0, x1)


def _billed(s: Scenario, entries: list[LedgerEntry], start: float, t: float) -> float:
    """Simulated money the entries billed from ``start`` to ``t``."""
    total = 0.0
    for e in entries:
        stop = t if e.ended_at is None else min(e.ended_at, t)
        total += e.price_per_hour * max(0.0, stop - max(e.started_at, start)) / 3600.0
    return total * s.scale


def series(s: Scenario, rec: Recording) -> Series:
    samples = [x for x in rec.samples if rec.day_start <= x.t <= max(rec.day_end, rec.day_start)]
    if not samples:
        raise EmptyRecording("no samples during the day: nothing to draw")
    out = Series(hours=[_hours(s, rec, x.t) for x in samples])
    entries = [e for es in rec.ledgers.values() for e in es]
    ideal = policies(s, rec.samples, rec.actions, rec.day_start, rec.day_end)[0].cumulative
    for x in samples:
        out.local.append(sum(w.local for w in x.workloads.values()))
        billing = 0
        for p in s.providers:
            n = sum(1 for e in rec.ledgers.get(p.name, []) if e.open_at(x.t))
            out.external.setdefault(p.name, []).append(n)
            billing += n
        out.placing.append(max(0, sum(w.external for w in x.workloads.values()) - billing))
        out.desired.append(sum(w.desired for w in x.workloads.values()))
        out.ready.append(sum(w.ready for w in x.workloads.values()))
        out.floor.append(
            sum(
                w.pdb.floor(x.workloads[w.name].desired)
                for w in s.workloads
                if w.pdb is not None and w.name in x.workloads
            )
        )
        out.spend_rate.append(spend_rate(rec.ledgers, x.t))
        out.spent.append(_billed(s, entries, rec.day_start, x.t))
        out.ideal_spent.append(next((m for t, m in reversed(ideal) if t <= x.t), 0.0))
    for start, end, label, _ in WINDOWS:
        opened: dict[str, float] = {}
        for a in sorted(rec.actions, key=lambda a: a.t):
            if a.kind == start:
                opened[a.subject] = a.t
            elif a.kind == end and a.subject in opened:
                t0 = opened.pop(a.subject)
                out.windows.append((label, a.subject, _hours(s, rec, t0), _hours(s, rec, a.t)))
        for subject, t0 in opened.items():
            out.windows.append((label, subject, _hours(s, rec, t0), _hours(s, rec, max(rec.day_end, t0))))
    return out


def _hours(s: Scenario, rec: Recording, t: float) -> float:
    return s.sim(t - rec.day_start) / 3600.0


def _bands(rec: Recording) -> list[tuple[str, float, float]]:
    """(training name, start, end): through Kueue from admission to finish, otherwise from the
    runner's actions; open bands end with the recording."""
    if rec.admissions:
        return [(a.job, a.admitted, a.finished or rec.end) for a in rec.admissions if a.admitted is not None]
    starts = {a.subject: a.t for a in rec.actions if a.kind == "training-start"}
    ends = {a.subject: a.t for a in rec.actions if a.kind == "training-end"}
    return [(name, t0, ends.get(name, rec.end)) for name, t0 in starts.items()]


def _queued(rec: Recording) -> list[tuple[str, float, float]]:
    """(training name, created, admitted or end): a Job waiting in the Kueue queue."""
    return [
        (a.job, a.created, a.admitted or rec.end)
        for a in rec.admissions
        if a.created is not None and (a.admitted or rec.end) - a.created > 1
    ]


def draw_traffic(s: Scenario, rec: Recording, ax: Axes) -> None:
    """Requests per second answered locally and by each provider (stacked, the talk's chart),
    failed requests as red crosses at the top; a note when no traffic was measured."""
    try:
        data = traffic_series(s, rec)
    except NoTraffic:
        why = "no data path on this machine" if rec.traffic is None else "no request was recorded"
        ax.text(0.5, 0.5, f"traffic not measured ({why})", ha="center", va="center", transform=ax.transAxes)
        ax.set_yticks([])
        return
    providers = [p.name for p in s.providers]
    ax.stackplot(
        data.hours,
        data.local,
        *(data.external[p] for p in providers),
        labels=["answered locally", *(f"answered by {p}" for p in providers)],
        colors=[LOCAL_COLOUR, *PROVIDER_COLOURS[: len(providers)]],
        step="post",
    )
    totals = [sum(v) for v in zip(data.local, *(data.external[p] for p in providers), strict=True)]
    top = max([*totals, 1.0]) * 1.3
    failed = [(x, n) for x, n in zip(data.hours, data.failed, strict=True) if n]
    total_failed = sum(data.failed)
    ax.scatter(
        [x for x, _ in failed],
        [top * 0.92] * len(failed),
        marker="x",
        color=SHORT_COLOUR,
        zorder=5,
        label=f"failed requests ({total_failed} in all)",
    )
    ax.set_ylim(0, top)
    ax.set_ylabel("requests / s (real)")
    ax.legend(loc="upper left", fontsize=8, frameon=False, ncol=len(providers) + 2)


def draw(s: Scenario, rec: Recording, path: Path) -> None:
    data = series(s, rec)
    samples = [x for x in rec.samples if rec.day_start <= x.t <= max(rec.day_end, rec.day_start)]
    fig, (ax, traffic_ax, money_ax, gate_ax) = plt.subplots(
        4, 1, figsize=(14, 12), dpi=110, sharex=True, gridspec_kw={"height_ratios": [6, 2.6, 2.2, 0.8]}
    )
    xs = data.hours
    providers = [p.name for p in s.providers]
    labels = ["local replicas"] + [f"external: {p} (billing)" for p in providers] + ["external: being placed"]
    colours = [LOCAL_COLOUR, *PROVIDER_COLOURS[: len(providers)], PLACING_COLOUR]
    stacks = [data.local, *(data.external[p] for p in providers), data.placing]
    ax.stackplot(xs, *stacks, labels=labels, colors=colours, alpha=1.0, step="post", zorder=2)
    ax.fill_between(
        xs,
        data.ready,
        data.desired,
        where=[r < d for r, d in zip(data.ready, data.desired, strict=True)],
        step="post",
        facecolor=SHORT_COLOUR,
        alpha=0.35,
        zorder=3,
        label="desired - Ready (short)",
    )
    ax.step(
        xs,
        data.desired,
        where="post",
        color="black",
        linestyle="--",
        linewidth=1.2,
        label="desired",
        zorder=4,
    )
    ax.step(xs, data.ready, where="post", color="#1b2631", linewidth=1.0, label="Ready replicas", zorder=4)
    if any(data.floor):
        ax.step(
            xs,
            data.floor,
            where="post",
            color=SHORT_COLOUR,
            linestyle=":",
            linewidth=1.4,
            label="PDB floor",
            zorder=4,
        )
    top = max([*data.desired, *(sum(v) for v in zip(*stacks, strict=True)), 1]) * 1.35
    for i, (name, t0, t1) in enumerate(_bands(rec)):
        x0, x1 = _hours(s, rec, t0), _hours(s, rec, t1)
        ax.axvspan(x0, x1, color="#3498db", alpha=0.15, zorder=0)
        ax.text(
            (x0 + x1) / 2,
            top * (0.95 - 0.06 * (i % 2)),
            f"training {name}",
            ha="center",
            va="top",
            fontsize=9,
        )
    for name, t0, t1 in _queued(rec):
        x0, x1 = _hours(s, rec, t0), _hours(s, rec, t1)
        ax.axvspan(x0, x1, facecolor="none", edgecolor="#3498db", hatch="//", alpha=0.35, zorder=0)
        ax.text((x0 + x1) / 2, top * 0.7, f"{name} queued", ha="center", va="top", fontsize=8)
    window_colour = {label: colour for _, _, label, colour in WINDOWS}
    for label, subject, x0, x1 in data.windows:
        for axis in (ax, money_ax):
            axis.axvspan(
                x0, x1, facecolor="none", edgecolor=window_colour[label], hatch="\\\\", alpha=0.5, zorder=1
            )
        ax.text(
            x0,
            top * 0.76,
            f" {label} {subject}",
            rotation=90,
            fontsize=8,
            va="top",
            color=window_colour[label],
        )
    for a in rec.actions:
        if a.kind in EVENT_LABELS:
            x = _hours(s, rec, a.t)
            ax.axvline(x, color="#555555", linestyle=":", linewidth=1)
            ax.text(x, top * 0.82, f" {EVENT_LABELS[a.kind]} {a.subject}", rotation=90, fontsize=8, va="top")
    ax.set_ylim(0, top)
    ax.set_ylabel("inference replicas")
    ax.set_title(
        f"{s.name}: inference replicas, traffic, training, gate and spend over the simulated day", pad=64
    )
    spend_ax = ax.twinx()
    spend_ax.step(
        xs,
        data.spend_rate,
        where="post",
        color="#6c3483",
        linewidth=2,
        label="external spend rate ($/h, ledgers)",
    )
    if any(x.service_spend_rate is not None for x in samples):
        own = [x.service_spend_rate or 0.0 for x in samples]
        spend_ax.step(
            xs,
            own,
            where="post",
            color="#a569bd",
            linewidth=1.2,
            linestyle="--",
            label="vkprovider's own spend account",
        )
    spend_ax.set_ylabel("external spend ($/h)")
    spend_ax.set_ylim(0, max([*data.spend_rate, 1.0]) * 1.6)
    handles, names = ax.get_legend_handles_labels()
    spend_handles, spend_names = spend_ax.get_legend_handles_labels()
    handles += [Patch(color="#3498db", alpha=0.15), *spend_handles]
    names += ["training job (through Kueue: admitted → finished)" if rec.admissions else "training job"]
    names += spend_names
    if _queued(rec):
        handles.append(Patch(facecolor="none", edgecolor="#3498db", hatch="//", alpha=0.35))
        names.append("training queued in Kueue")
    for label in sorted({w[0] for w in data.windows}):
        handles.append(Patch(facecolor="none", edgecolor=window_colour[label], hatch="\\\\"))
        names.append(f"{label} window")
    ax.legend(
        handles,
        names,
        loc="lower center",
        bbox_to_anchor=(0.5, 1.0),
        fontsize=8,
        ncol=(len(names) + 2) // 3,
        frameon=False,
    )

    draw_traffic(s, rec, traffic_ax)

    money_ax.step(xs, data.spent, where="post", color="#6c3483", linewidth=2, label="spent so far (ledgers)")
    money_ax.step(
        xs,
        data.ideal_spent,
        where="post",
        color="#1b2631",
        linestyle="--",
        linewidth=1.2,
        label="the ideal (lower bound)",
    )
    money_ax.set_ylabel("cumulative $")
    money_ax.set_ylim(0, max([*data.spent, *data.ideal_spent, 1.0]) * 1.15)
    money_ax.legend(loc="upper left", fontsize=8, frameon=False)

    gate_running = rec.components.get("gate", False)
    for here, after in itertools.pairwise(samples):
        state = here.gate_tainted if gate_running else None
        colour = {True: LOCAL_COLOUR, False: "#e67e22", None: "#bdc3c7"}[state]
        x0 = _hours(s, rec, here.t)
        gate_ax.broken_barh([(x0, _hours(s, rec, after.t) - x0)], (0, 1), color=colour)
    gate_ax.set_yticks([])
    gate_ax.set_ylabel("gate", rotation=0, labelpad=18)
    gate_ax.legend(
        [Patch(color=LOCAL_COLOUR), Patch(color="#e67e22"), Patch(color="#bdc3c7")],
        ["taint on: local GPUs free, new pods stay home", "taint off: bursting allowed", "no gate running"],
        loc="upper center",
        bbox_to_anchor=(0.5, -0.9),
        ncol=3,
        fontsize=8,
    )
    day_hours = s.clock.day / 3600.0
    end_hours = max([day_hours, *xs])
    gate_ax.set_xlim(0, end_hours)
    step = 2 if day_hours > 12 else max(day_hours / 8, 0.25)
    ticks = [i * step for i in range(int(end_hours / step) + 1)]
    gate_ax.set_xticks(ticks)
    gate_ax.set_xticklabels([f"{int(t):02d}:{int(t % 1 * 60):02d}" for t in ticks])
    gate_ax.set_xlabel("simulated time of day")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
