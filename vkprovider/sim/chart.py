"""``timeline.png``: the chart a person would draw to explain the system.

Top: inference replicas as stacked areas (local, then external per provider), the desired count
as a dashed line, training jobs as shaded bands (through Kueue: admitted to finished, and
hatched while queued), other timeline events as dotted lines, and the
spend rate (from the ledgers) on a second axis. Bottom strip: the gate's state over the day.
The x axis is the simulated clock.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import itertools

import matplotlib.pyplot as plt
from matplotlib.patches import Patch

from vkprovider.sim.costs import spend_rate
from vkprovider.sim.record import Recording
from vkprovider.sim.scenario import Scenario

LOCAL_COLOUR = "#2e8b57"
PROVIDER_COLOURS = ["#f39c12", "#d35400", "#c0392b", "#8e44ad", "#7f8c8d"]
EVENT_LABELS = {"capacity": "capacity", "outage-start": "outage", "cordon": "cordon", "scale": "scale"}


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


def draw(s: Scenario, rec: Recording, path: Path) -> None:
    samples = [x for x in rec.samples if x.t >= rec.day_start]
    fig, (ax, gate_ax) = plt.subplots(
        2, 1, figsize=(14, 7.5), dpi=110, sharex=True, gridspec_kw={"height_ratios": [6, 1]}
    )
    xs = [_hours(s, rec, x.t) for x in samples]
    providers = [p.name for p in s.providers]
    local = [sum(w.local for w in x.workloads.values()) for x in samples]
    external = [[x.external_by_provider.get(p, 0) for x in samples] for p in providers]
    desired = [sum(w.desired for w in x.workloads.values()) for x in samples]
    ready = [sum(w.ready for w in x.workloads.values()) for x in samples]
    labels = ["local replicas"] + [f"external: {p}" for p in providers]
    colours = [LOCAL_COLOUR, *PROVIDER_COLOURS[: len(providers)]]
    if samples:
        ax.stackplot(xs, local, *external, labels=labels, colors=colours, alpha=0.85, step="post")
        ax.step(
            xs, desired, where="post", color="black", linestyle="--", linewidth=1.2, label="desired replicas"
        )
        ax.step(xs, ready, where="post", color="#1b2631", linewidth=1.0, label="Ready replicas")
    top = max([*desired, 1]) * 1.35
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
    for a in rec.actions:
        if a.kind in EVENT_LABELS:
            x = _hours(s, rec, a.t)
            ax.axvline(x, color="#555555", linestyle=":", linewidth=1)
            ax.text(x, top * 0.82, f" {EVENT_LABELS[a.kind]} {a.subject}", rotation=90, fontsize=8, va="top")
    ax.set_ylim(0, top)
    ax.set_ylabel("inference replicas")
    ax.set_title(f"{s.name}: inference replicas, training, gate and spend over the simulated day", pad=34)
    spend_ax = ax.twinx()
    spend = [spend_rate(rec.ledgers, x.t) for x in samples]
    spend_ax.step(
        xs, spend, where="post", color="#6c3483", linewidth=2, label="external spend rate ($/h, ledgers)"
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
    spend_ax.set_ylim(0, max([*spend, 1.0]) * 1.6)
    handles, names = ax.get_legend_handles_labels()
    spend_handles, spend_names = spend_ax.get_legend_handles_labels()
    handles += [Patch(color="#3498db", alpha=0.15), *spend_handles]
    names += ["training job (through Kueue: admitted → finished)" if rec.admissions else "training job"]
    names += spend_names
    if _queued(rec):
        handles.append(Patch(facecolor="none", edgecolor="#3498db", hatch="//", alpha=0.35))
        names.append("training queued in Kueue")
    ax.legend(
        handles,
        names,
        loc="lower center",
        bbox_to_anchor=(0.5, 1.0),
        fontsize=8,
        ncol=(len(names) + 1) // 2,
        frameon=False,
    )

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
        bbox_to_anchor=(0.5, -0.55),
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
