"""make bench-gpu's report: joins the harness's timed run (bench.jsonl), its profiled run
(profile.jsonl, in launch order) and Nsight Compute's raw page (ncu.csv) into markdown tables.

In the profiled run each case's iterations sit between two launches of the marker kernel
(custom_kernel_small_affine_q4_bf16); every kernel between them is the case's. Bandwidth is the
bytes a case must move (the manifest's cost for a kernel) over its kernel time, as a fraction of
the copy bandwidth measured in the same run (copy.txt).

usage: python3 gpu/bench_report.py OUT_DIR
"""

import csv
import json
import sys
from pathlib import Path

MARKER = "custom_kernel_small_affine_q4_bf16"


def jsonl(path):
    rows = []
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if line.startswith("{"):
            rows.append(json.loads(line))
    return rows


# What bounds a kernel, where the profile has it (gpu/bench.sh's LIMITS): percentages, and warps
# stalled per issue for three reasons.
LIMITS = {
    "DRAM": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "issue": "sm__inst_issued.avg.pct_of_peak_sustained_elapsed",
    "warps": "sm__warps_active.avg.pct_of_peak_sustained_active",
}
STALLS = {
    "memory": "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
    "load queue": "smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio",
    "not selected": "smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio",
}


def ncu_kernels(path):
    """(name, seconds, dram bytes read + written, {limit: value}) per profiled kernel, in launch
    order; the limits are those of LIMITS and STALLS the profile has."""
    lines = [l for l in Path(path).read_text().splitlines() if l.startswith('"')]
    rows = list(csv.reader(lines))
    header, units, data = rows[0], rows[1], rows[2:]
    col = {name: i for i, name in enumerate(header)}
    # one unit a column, which Nsight Compute picks for the column's values
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3,
             "second": 1.0, "byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12}

    def value(row, name):
        i = col[name]
        if units[i] not in scale:
            raise SystemExit(f"ncu.csv: unit {units[i]!r} of {name} is not known")
        return float(row[i].replace(",", "")) * scale[units[i]]

    def number(text):
        try:
            return float(text.replace(",", ""))
        except ValueError:  # ncu's "n/a" where a metric has no value
            return None

    def limits(row):
        named = {**LIMITS, **STALLS}
        values = {k: number(row[col[m]]) for k, m in named.items() if m in col}
        return {k: v for k, v in values.items() if v is not None}

    data.sort(key=lambda r: int(r[col["ID"]]))
    return [
        (r[col["Kernel Name"]], value(r, "gpu__time_duration.sum"),
         value(r, "dram__bytes_read.sum") + value(r, "dram__bytes_write.sum"), limits(r))
        for r in data
    ]


def bound(inside):
    """The case's kernels' limits, weighted by their time: `DRAM 37%, issue 72%, warps 45%;
    waits: not selected` (the stall with the most warps per issue)."""
    total = sum(k[1] for k in inside)
    if not total or not inside[0][3]:
        return "-"
    mean = {name: sum(k[1] * k[3].get(name, 0.0) for k in inside) / total for name in {**LIMITS, **STALLS}}
    text = ", ".join(f"{name} {mean[name]:.0f}%" for name in LIMITS if any(name in k[3] for k in inside))
    stalls = [s for s in STALLS if any(s in k[3] for k in inside)]
    if stalls:
        text += "; waits: " + max(stalls, key=lambda s: mean[s])
    return text


def per_case(cases, kernels):
    """Each case's kernel time and DRAM bytes per iteration, from the kernels between its markers."""
    out, i = {}, 0
    marks = [k for k, kernel in enumerate(kernels) if MARKER in kernel[0]]
    if len(marks) != 2 * len(cases):
        # a profiled run cut short: its complete cases still count
        print(f"note: {len(marks)} marker launches for {len(cases)} profiled cases: the profile is incomplete", file=sys.stderr)
    for case, (begin, end) in zip(cases, zip(marks[0::2], marks[1::2])):
        inside = kernels[begin + 1:end]
        n = case["iterations"]
        out[(case["name"], case["sizes"])] = (sum(k[1] for k in inside) / n, sum(k[2] for k in inside) / n, len(inside) / n, bound(inside))
    return out


def timed_us(c, field):
    """A timed figure of a case, us a launch: `wall_us` (its wall time) or `build_us` (the part
    of it the host spent building its chain, before the evaluation); `-` for a case profiled but
    not timed, or timed before bench.rs measured the figure."""
    return "-" if c.get(field) is None else f"{c[field]:.1f}"


def main():
    out = Path(sys.argv[1])
    copy = float((out / "copy.txt").read_text())
    # a case that failed prints its error instead of its times (listed at the end)
    runs = jsonl(out / "bench.jsonl")
    timed = [c for c in runs if "wall_us" in c]
    profiled = {}
    if (out / "ncu.csv").exists():
        cases = [c for c in jsonl(out / "profile.jsonl") if "iterations" in c]
        profiled = per_case(cases, ncu_kernels(out / "ncu.csv"))
        # a case profiled but not timed (KERNELGEN_BENCH_PHASES=profiled) has no wall time
        seen = {(c["name"], c["sizes"]) for c in timed}
        timed += [dict(c, wall_us=None) for c in cases if (c["name"], c["sizes"]) not in seen and (c["name"], c["sizes"]) in profiled]
    print(f"Device-to-device copy (read + write): {copy:.2f} TB/s; fractions below are of it.\n")
    print("| case | sizes | MB moved | wall us / iter | of it building the chain | kernel us / iter | kernels / iter | TB/s | of copy | DRAM MB (ncu) | bound (ncu) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for c in timed:
        mb = c["bytes"] / 1e6
        kernel_s, dram, launches, limits = profiled.get((c["name"], c["sizes"]), (None, None, None, None))
        cells = [c["name"], c["sizes"] or "-", f"{mb:.2f}", timed_us(c, "wall_us"), timed_us(c, "build_us")]
        if kernel_s:
            tbps = c["bytes"] / kernel_s / 1e12
            cells += [f"{kernel_s * 1e6:.1f}", f"{launches:.0f}", f"{tbps:.2f}", f"{100 * tbps / copy:.0f}%", f"{dram / 1e6:.2f}", limits]
        else:
            cells += ["-"] * 6
        print("| " + " | ".join(cells) + " |")

    # kernelgen beside MLX: each MLX case names the case of kernelgen's it is the baseline of
    ours = {(c["name"], c["sizes"]): c for c in timed if c["kind"] != "mlx"}
    pairs = [(ours[(c["kernel"], c["sizes"])], c) for c in timed if c["kind"] == "mlx" and (c.get("kernel"), c["sizes"]) in ours]
    if pairs:
        print("\nSide by side (kernel time from ncu where profiled; wall time of a lazy chain):\n")
        print("| kernelgen | sizes | kernel us | of copy | wall us | MLX | kernel us | of copy | wall us | MLX wall / kernelgen wall |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for k, m in pairs:
            def timing(c):
                kernel_s = profiled.get((c["name"], c["sizes"]), (None,))[0]
                if not kernel_s:
                    return ["-", "-"]
                return [f"{kernel_s * 1e6:.1f}", f"{100 * c['bytes'] / kernel_s / 1e12 / copy:.0f}%"]
            ratio = "-" if k["wall_us"] is None or m["wall_us"] is None else f"{m['wall_us'] / k['wall_us']:.2f}"
            cells = [k["name"], k["sizes"] or "-", *timing(k), timed_us(k, "wall_us"), m["name"], *timing(m), timed_us(m, "wall_us"), ratio]
            print("| " + " | ".join(cells) + " |")

    failed = [c for c in runs if "error" in c]
    if failed:
        print("\nFailed:\n")
        for c in failed:
            print(f"- {c.get('name') or c.get('setup')} {c.get('sizes', '')}: {c['error']}")


if __name__ == "__main__":
    main()
