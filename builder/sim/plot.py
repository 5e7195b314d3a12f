#!/usr/bin/python3
"""Draws make sim's results (Debian's matplotlib) and prints what they say.

Reads OUT/scale.csv, OUT/barrier-every.csv, OUT/failures.csv and
OUT/receive-window.csv (run.sh; the first column names the plan: servers,
or servers and what was lost); writes
event-rate.png and throughput.png (against servers, one line per barrier,
as the reference design's Fig. 10 and 12, and one for no barrier with
--receive-window 1), barrier-every.png (throughput at 163 servers against
--barrier-every) and receive-window.png (at 163 servers against
--receive-window); prints the servers from which the tournament
beats the centralized barrier, what no barrier costs against the
tournament, the best --barrier-every and what the receive window gives.
Usage: plot.py OUT_DIR
"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def save(out, file, xlabel, ylabel, title, log2=False):
    """Labels the current figure, writes it to OUT/FILE and closes it."""
    if log2:
        plt.xscale("log", base=2)
    plt.xlabel(xlabel)
    plt.ylabel(ylabel)
    plt.title(title)
    plt.grid(alpha=0.3)
    plt.legend()
    plt.tight_layout()
    plt.savefig(os.path.join(out, file), dpi=110)
    plt.close()


def main():
    out = sys.argv[1]
    scale = rows(os.path.join(out, "scale.csv"))
    every = rows(os.path.join(out, "barrier-every.csv"))
    kinds = ["none", "tournament", "centralized"]
    by = {k: sorted(((int(r["plan"]), r) for r in scale if r["barrier"] == k and r["receive_window"] == "0"),
                    key=lambda x: x[0]) for k in kinds}
    one_ahead = sorted(((int(r["plan"]), r) for r in scale if r["barrier"] == "none" and r["receive_window"] == "1"),
                       key=lambda x: x[0])

    for column, label, file in [("event_rate", "events per second (millions)", "event-rate.png"),
                                ("throughput_tbps", "aggregate throughput (Tb/s)", "throughput.png")]:
        plt.figure(figsize=(6.4, 4.2))
        scale_of = 1e-6 if column == "event_rate" else 1
        for k in kinds:
            plt.plot([s for s, _ in by[k]], [float(r[column]) * scale_of for _, r in by[k]], marker="o", label="barrier " + k)
        plt.plot([s for s, _ in one_ahead], [float(r[column]) * scale_of for _, r in one_ahead], marker="s",
                 linestyle="-.", label="no barrier, --receive-window 1")
        if column == "throughput_tbps":
            plt.plot([s for s, _ in by["none"]], [float(r["analytic_tbps"]) for _, r in by["none"]], "k--", label="ideal network")
        save(out, file, "servers (two units each)", label, "eb-farm-sim, HDR fat tree, barrier every phase")

    plt.figure(figsize=(6.4, 4.2))
    for k in ["tournament", "centralized"]:
        pts = sorted((int(r["barrier_every"]), float(r["throughput_tbps"])) for r in every if r["barrier"] == k)
        plt.plot([p for p, _ in pts], [t for _, t in pts], marker="o", label="barrier " + k)
    none = [float(r["throughput_tbps"]) for r in every if r["barrier"] == "none"]
    if none:
        plt.axhline(none[0], color="grey", linestyle=":", label="no barrier")
    save(out, "barrier-every.png", "--barrier-every (phases)", "aggregate throughput (Tb/s)",
         "eb-farm-sim, 163 servers (LHCb)", log2=True)

    rate = {k: {s: float(r["event_rate"]) for s, r in by[k]} for k in kinds}
    crossover = next((s for s in sorted(rate["tournament"]) if rate["tournament"][s] > rate["centralized"][s]), None)
    print("tournament builds more events than centralized from %s servers" % crossover)
    for s in sorted(rate["tournament"]):
        t, c, n = rate["tournament"][s], rate["centralized"][s], rate["none"][s]
        print("%4d servers: centralized %+.1f %% against tournament, no barrier %+.1f %%" % (s, 100 * (c - t) / t, 100 * (n - t) / t))
    best = max((r for r in every if r["barrier"] != "none"), key=lambda r: float(r["throughput_tbps"]))
    print("best at 163 servers: barrier %s every %s phases, %.1f Tb/s (no barrier %.1f Tb/s)"
          % (best["barrier"], best["barrier_every"], float(best["throughput_tbps"]), none[0] if none else float("nan")))
    ahead = {s: float(r["event_rate"]) for s, r in one_ahead}
    for s in sorted(ahead):
        print("%4d servers: no barrier with one receive ahead %+.1f %% against a cycle's at once, %+.1f %% against the tournament"
              % (s, 100 * (ahead[s] - rate["none"][s]) / rate["none"][s], 100 * (ahead[s] - rate["tournament"][s]) / rate["tournament"][s]))

    window = rows(os.path.join(out, "receive-window.csv"))
    plt.figure(figsize=(6.4, 4.2))
    for k, every in [("none", "1"), ("tournament", "4")]:
        pts = sorted((int(r["receive_window"]), float(r["throughput_tbps"])) for r in window
                     if r["barrier"] == k and r["barrier_every"] == every)
        # Window 0 (a cycle's receives at once, as eb-builder) drawn at the cycle's length.
        cycle = int(window[0]["ranks"]) - 1
        pts = sorted((p if p > 0 else cycle, t) for p, t in pts)
        plt.plot([p for p, _ in pts], [t for _, t in pts], marker="o",
                 label="no barrier" if k == "none" else "tournament every %s phases" % every)
        for p, t in pts:
            print("163 servers, barrier %-10s every %s, receives posted %s ahead: %.1f Tb/s"
                  % (k, every, "a cycle (the default)" if p == cycle else "%d phase%s" % (p, "s" if p > 1 else ""), t))
    save(out, "receive-window.png", "--receive-window (rightmost: 0, a cycle's receives at once)",
         "aggregate throughput (Tb/s)", "eb-farm-sim, 163 servers (LHCb)", log2=True)

    for r in rows(os.path.join(out, "failures.csv")):
        print("%-16s %4s live ranks: %.1f Tb/s, %.3g events/s" % (r["plan"], r["live"], float(r["throughput_tbps"]), float(r["event_rate"])))


if __name__ == "__main__":
    main()
