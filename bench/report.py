"""Summarise a benchmark run: medians per configuration and row, and the
speed of each configuration relative to ext4 (1.00 = as fast as ext4,
0.95 = 5% slower). Prints the table, writes it into the marked section of
a markdown file, and draws a bar chart.

    report.py RAW.jsonl DOC.md PLOT.png [SECTION]

SECTION (default "bench") names the marked section of DOC.md it writes:
bench/guest.py's rows go in "bench", bench/readpath.py's in "readpath".
Rows counted rather than measured (unit "count") are listed under the
table.
"""
import json
import os
import statistics
import sys

def load(path):
    """{(config, row): [values]}, {(config, row): [ratios to ext4]}, units,
    rows, configs. A ratio is taken within one run: the record's own (an
    interleaved row) or the value against ext4's in the same run."""
    recs, units, rows, configs = [], {}, [], []
    counts = {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r["unit"] == "count":
                counts.setdefault(r["row"], []).append(r["value"])
                continue
            recs.append(r)
            units[r["row"]] = r["unit"]
            if r["row"] not in rows:
                rows.append(r["row"])
            if r["config"] not in configs:
                configs.append(r["config"])
    ext4 = {(r["run"], r["row"]): r["value"] for r in recs
            if r["config"] == "ext4"}
    data, ratios = {}, {}
    for r in recs:
        key = (r["config"], r["row"])
        data.setdefault(key, []).append(r["value"])
        ratio = r.get("ratio")
        base = ext4.get((r["run"], r["row"]))
        if ratio is None and base is None:
            continue    # a row of one configuration: no ratio to ext4
        if ratio is None:
            ratio = speed(r["unit"], r["value"], base)
        ratios.setdefault(key, []).append(ratio)
    return data, ratios, units, rows, configs, counts


def speed(unit, value, ext4):
    """Relative speed: time rows invert, rate rows divide."""
    return ext4 / value if unit == "s" else value / ext4


def table(data, run_ratios, units, rows, configs):
    others = [c for c in configs if c != "ext4"]
    head = ["row", "unit"] + [f"{c} (median)" for c in configs] + \
        [f"{c} / ext4" for c in others]
    lines = ["| " + " | ".join(head) + " |",
             "|" + "---|" * len(head)]
    ratios = {}
    for row in rows:
        med = {c: statistics.median(data[(c, row)]) for c in configs
               if (c, row) in data}
        cells = [row, units[row]]
        cells += ["–" if c not in med else f"{med[c]:.3f}"
                  if units[row] == "s" else f"{med[c]:.0f}"
                  for c in configs]
        for c in others:
            if (c, row) not in run_ratios:
                cells.append("–")
                continue
            rs = run_ratios[(c, row)]
            ratios[(c, row)] = statistics.median(rs)
            cell = f"{ratios[(c, row)]:.2f}"
            if len(rs) > 1:
                cell += f" ({min(rs):.2f}–{max(rs):.2f})"
            cells.append(cell)
        lines.append("| " + " | ".join(cells) + " |")
    n = len(next(iter(data.values())))
    lines.append("")
    lines.append(f"Medians of {n} runs per cell. A ratio is the speed "
                 "relative to ext4 within each run (1.00 = as fast as ext4, "
                 "higher is faster): the median over the runs, and in "
                 "brackets the lowest and highest. The micro rows interleave "
                 "the configurations in 40 short rounds and take the median "
                 "of the rounds' ratios.")
    return "\n".join(lines), ratios


def plot(ratios, rows, configs, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    others = [c for c in configs if c != "ext4"]
    # Rows of one configuration (no ext4 to compare with) are in the table.
    rows = [r for r in rows if any((c, r) in ratios for c in others)]
    fig, ax = plt.subplots(figsize=(10, 5))
    width = 0.8 / len(others)
    for i, c in enumerate(others):
        xs = [j + i * width for j in range(len(rows))]
        ax.bar(xs, [ratios.get((c, r), 0) for r in rows], width, label=c)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.axhline(0.95, color="grey", linewidth=0.8, linestyle="--")
    ax.set_xticks([j + width * (len(others) - 1) / 2
                   for j in range(len(rows))])
    ax.set_xticklabels(rows, rotation=30, ha="right")
    ax.set_ylabel("speed relative to ext4")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main():
    raw, doc, png = sys.argv[1:4]
    tag = sys.argv[4] if len(sys.argv) > 4 else "bench"
    begin, end = f"<!-- {tag}:begin -->", f"<!-- {tag}:end -->"
    data, run_ratios, units, rows, configs, counts = load(raw)
    text, ratios = table(data, run_ratios, units, rows, configs)
    for row, values in counts.items():
        text += f"\n\n{row}: {', '.join(str(v) for v in values)}"
    print(text)
    section = f"{begin}\n{text}\n\n![speed relative to ext4]" \
              f"({os.path.basename(png)})\n{end}"
    old = open(doc).read() if os.path.exists(doc) else \
        "# Benchmarks\n\n" + begin + "\n" + end + "\n"
    if begin in old and end in old:
        new = old[:old.index(begin)] + section + old[old.index(end) +
                                                    len(end):]
    else:
        new = old.rstrip() + "\n\n" + section + "\n"
    with open(doc, "w") as f:
        f.write(new)
    plot(ratios, rows, configs, png,
         f"{', '.join(c for c in configs if c != 'ext4')} over ext4 "
         "(same VM boot; 1.0 = ext4, dashed = 0.95)")


main()
