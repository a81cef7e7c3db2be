"""gpu/bench_report.py (make bench-gpu's report) on a made-up run: Nsight Compute's units, the
kernels between two markers attributed to their case, kernelgen's cases beside MLX's, failures."""

import csv
import io
import json
import subprocess
import sys

from kernelgen_paths import ROOT

MARKER = "custom_kernel_small_affine_q4_bf16(const __nv_bfloat16 *)"


def ncu_csv(kernels, time_unit="us", byte_unit="Mbyte"):
    """Nsight Compute's raw page: a header row, a units row, one row per kernel (ID order)."""
    out = io.StringIO()
    w = csv.writer(out, quoting=csv.QUOTE_ALL)
    w.writerow(["ID", "Kernel Name", "gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum"])
    w.writerow(["", "", time_unit, byte_unit, byte_unit])
    for i, (name, t, r, wr) in enumerate(kernels):
        w.writerow([str(i), name, f"{t:,}", f"{r:,}", f"{wr:,}"])
    return out.getvalue()


def write_run(tmp, timed, profiled, kernels, **units):
    (tmp / "copy.txt").write_text("4.0000\n")
    (tmp / "bench.jsonl").write_text("".join(json.dumps(c) + "\n" for c in timed))
    (tmp / "profile.jsonl").write_text("==PROF== Connected\n" + "".join(json.dumps(c) + "\n" for c in profiled))
    (tmp / "ncu.csv").write_text(ncu_csv(kernels, **units))


def report(tmp):
    r = subprocess.run([sys.executable, str(ROOT / "gpu" / "bench_report.py"), str(tmp)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout, r.stderr


def row(out, first_cell):
    """The cells of the first table row whose first cell is `first_cell`."""
    line = next(l for l in out.splitlines() if l.startswith(f"| {first_cell} |"))
    return [c.strip() for c in line.strip().strip("|").split("|")]


ours = {"name": "k", "kind": "kernel", "kernel": "k", "sizes": "M=1", "bytes": 4_000_000, "launches": 1}
theirs = {"name": "mlx op", "kind": "mlx", "kernel": "k", "sizes": "M=1", "bytes": 4_000_000, "launches": 0}


def test_kernels_between_markers_are_their_case(tmp_path):
    write_run(
        tmp_path,
        [dict(ours, iterations=10, wall_us=5.0, build_us=1.5), dict(theirs, iterations=10, wall_us=10.0)],
        [dict(ours, iterations=1), dict(theirs, iterations=1)],
        [
            ("setup_kernel", 99.0, 1.0, 1.0),  # before the first marker: no case's
            (MARKER, 4.0, 0.05, 0.0),
            ("custom_kernel_k", 2.0, 3.5, 0.5),
            (MARKER, 4.0, 0.05, 0.0),
            ("warm_up", 50.0, 1.0, 1.0),  # between cases: no case's
            (MARKER, 4.0, 0.05, 0.0),
            ("mlx_a", 1.5, 2.0, 0.0),
            ("mlx_b", 2.5, 2.0, 0.0),
            (MARKER, 4.0, 0.05, 0.0),
        ],
    )
    out, _ = report(tmp_path)
    # the wall time, and the part of it building the chain (not measured for MLX's op here)
    assert row(out, "k")[3:5] == ["5.0", "1.5"] and row(out, "mlx op")[3:5] == ["10.0", "-"]
    # 4 MB in 2 us: 2 TB/s, half of the 4 TB/s copy; ncu's DRAM bytes in Mbyte
    assert row(out, "k")[5:10] == ["2.0", "1", "2.00", "50%", "4.00"]
    # two kernels, 4 us
    assert row(out, "mlx op")[5:9] == ["4.0", "2", "1.00", "25%"]
    side = [c.strip() for c in next(l for l in out.splitlines() if l.startswith("| k | M=1 | 2.0 |")).strip("| ").split("|")]
    # MLX's wall over kernelgen's
    assert side[5] == "mlx op" and side[-1] == "2.00", side


def test_units_are_read_from_the_units_row(tmp_path):
    write_run(
        tmp_path,
        [dict(ours, iterations=10, wall_us=5.0)],
        [dict(ours, iterations=1)],
        [(MARKER, 0.004, 0.00005, 0.0), ("custom_kernel_k", 0.002, 0.0035, 0.0005), (MARKER, 0.004, 0.00005, 0.0)],
        time_unit="ms",
        byte_unit="Gbyte",
    )
    out, _ = report(tmp_path)
    assert row(out, "k")[5:10] == ["2.0", "1", "2.00", "50%", "4.00"]


def test_an_unknown_unit_is_an_error(tmp_path):
    write_run(tmp_path, [dict(ours, iterations=1, wall_us=1.0)], [dict(ours, iterations=1)],
              [(MARKER, 1.0, 1.0, 0.0), (MARKER, 1.0, 1.0, 0.0)], time_unit="fortnight")
    r = subprocess.run([sys.executable, str(ROOT / "gpu" / "bench_report.py"), str(tmp_path)], capture_output=True, text=True)
    assert r.returncode != 0 and "fortnight" in (r.stdout + r.stderr)


def test_a_profile_cut_short_keeps_its_complete_cases_and_failures_are_listed(tmp_path):
    failed = dict(theirs, name="mlx broken", error="out of memory")
    write_run(
        tmp_path,
        [dict(ours, iterations=10, wall_us=5.0), failed],
        [dict(ours, iterations=1), dict(theirs, iterations=1)],
        [(MARKER, 4.0, 0.05, 0.0), ("custom_kernel_k", 2.0, 3.5, 0.5), (MARKER, 4.0, 0.05, 0.0), (MARKER, 4.0, 0.05, 0.0), ("mlx_a", 1.0, 1.0, 0.0)],
    )
    out, err = report(tmp_path)
    assert "incomplete" in err
    assert row(out, "k")[5] == "2.0"
    assert "- mlx broken M=1: out of memory" in out


def test_a_profiled_half_alone_reports_kernel_times_without_wall_times(tmp_path):
    # KERNELGEN_BENCH_PHASES=profiled: bench.jsonl is empty, the profile's cases still report
    write_run(
        tmp_path,
        [],
        [dict(ours, iterations=1), dict(theirs, iterations=1)],
        [(MARKER, 4.0, 0.05, 0.0), ("custom_kernel_k", 2.0, 3.5, 0.5), (MARKER, 4.0, 0.05, 0.0),
         (MARKER, 4.0, 0.05, 0.0), ("mlx_a", 4.0, 4.0, 0.0), (MARKER, 4.0, 0.05, 0.0)],
    )
    out, _ = report(tmp_path)
    assert row(out, "k")[3:9] == ["-", "-", "2.0", "1", "2.00", "50%"]
    side = [c.strip() for c in next(l for l in out.splitlines() if l.startswith("| k | M=1 | 2.0 |")).strip("| ").split("|")]
    assert side[4] == "-" and side[5] == "mlx op" and side[6] == "4.0" and side[-1] == "-", side
