//! Named Apple GPUs and the roofline time of a launch on them:
//! `max(bytes / bandwidth, flops / peak FP32 rate)`, the time a launch takes
//! at the least if it streamed its bytes at the chip's memory bandwidth and
//! kept every FP32 lane busy. A lower bound for comparing kernels and
//! changes, not a prediction: caches, occupancy, launch overhead and the
//! share of bandwidth a GPU really gets are not in it.
//!
//! Each chip is its top GPU configuration unless the key says otherwise
//! (`m3-max-30c`). Sources:
//!
//! - **Memory bandwidth** is Apple's published figure (newsroom
//!   announcement or the product's tech-specs page, named per entry), except
//!   M1's, which Apple never stated (see its entry).
//! - **FP32 peak**: Apple published TFLOPS for M1 (2.6), M1 Pro (5.2),
//!   M1 Max (10.4) and M2 Ultra (27.2), named per entry. For the others
//!   Apple publishes GPU core counts, not TFLOPS or clocks, so the figure is
//!   derived as cores x 128 FP32 ALUs per core x 2 (a fused multiply-add is
//!   two flops) x GPU clock, the clock taken from third-party measurements
//!   (named per entry). The derivation reproduces Apple's own figures where
//!   they exist (M1: 8 x 128 x 2 x 1.278 GHz = 2.62 TFLOPS; M2 Ultra:
//!   76 x 128 x 2 x 1.398 GHz = 27.2 TFLOPS). M5 has no FP32 figure: Apple
//!   gives none and no clock figure was found; its roofline is memory-only.

/// One GPU of the table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gpu {
    /// What `--gpu` takes: `m2-max`.
    pub key: &'static str,
    /// `Apple M2 Max (38-core GPU)`.
    pub name: &'static str,
    /// GPU cores of this configuration.
    pub gpu_cores: u32,
    /// Unified memory bandwidth, GB/s (10^9 bytes per second).
    pub bandwidth_gb_s: f64,
    /// Where the bandwidth figure comes from.
    pub bandwidth_source: &'static str,
    /// Peak FP32 rate, TFLOPS (10^12 flops per second), when known.
    pub fp32_tflops: Option<f64>,
    /// Where the FP32 figure comes from, or how it was derived.
    pub fp32_source: &'static str,
}

/// cores x 128 ALUs x 2 flops x clock (GHz), in TFLOPS.
const fn derived(cores: u32, clock_ghz: f64) -> Option<f64> {
    Some(cores as f64 * 128.0 * 2.0 * clock_ghz / 1000.0)
}

const NEWSROOM_M1_PRO_MAX: &str = "Apple Newsroom, 2021-10-18, \"Introducing M1 Pro and M1 Max: the most powerful chips Apple has ever built\" (apple.com/newsroom/2021/10/introducing-m1-pro-and-m1-max-the-most-powerful-chips-apple-has-ever-built/)";
const EVENT_M1_PRO_MAX: &str = "Apple's 2021-10-18 \"Unleashed\" event (GPU slide; not in the newsroom text), as reported e.g. by wccftech.com/apple-unveils-m1-max-m1-pro-5nm-socs-up-to-10-cpu-cores-high-end-gaming-laptop-gpu/; = cores x 128 x 2 x 1.296 GHz";
const NEWSROOM_M2_PRO_MAX: &str = "Apple Newsroom, 2023-01-17, \"Apple unveils M2 Pro and M2 Max: next-generation chips for next-level workflows\" (apple.com/newsroom/2023/01/)";
const CLOCK_M2: &str = "not published by Apple; derived: cores x 128 x 2 x 1.398 GHz, the M2-generation GPU clock measured by third parties (e.g. notebookcheck.net, hmc-tech.com list 1398 MHz); the same derivation gives Apple's 27.2 TFLOPS for M2 Ultra";
const NEWSROOM_M3: &str = "Apple Newsroom, 2023-10-30, \"Apple unveils M3, M3 Pro, and M3 Max, the most advanced chips for a personal computer\" (apple.com/newsroom/2023/10/), and the MacBook Pro (M3, 2023) tech specs page";
const CLOCK_M3: &str = "not published by Apple; derived: cores x 128 x 2 x 1.398 GHz (third-party M3 GPU clock, e.g. hmc-tech.com lists 1398 MHz; uncertain by a few percent)";
const NEWSROOM_M4_PRO_MAX: &str = "Apple Newsroom, 2024-10-30, \"Apple introduces M4 Pro and M4 Max\" (apple.com/newsroom/2024/10/apple-introduces-m4-pro-and-m4-max/), and the MacBook Pro (M4, 2024) tech specs page";
const CLOCK_M4: &str = "not published by Apple; derived: cores x 128 x 2 x 1.47 GHz (third-party M4 GPU clock, hmc-tech.com lists 1470 MHz; other sites list up to 1.6 GHz, so this may be ~8% low)";

/// The table: every M1 to M4 chip (base, Pro, Max, Ultra where it exists), M5.
pub const GPUS: &[Gpu] = &[
    Gpu {
        key: "m1",
        name: "Apple M1 (8-core GPU)",
        gpu_cores: 8,
        bandwidth_gb_s: 68.25,
        bandwidth_source: "not published by Apple; 128-bit LPDDR4X-4266 = 68.25 GB/s (AnandTech's M1 review, 2020-11); consistent with Apple's \"100GB/s ... 50 percent more than M1\" for M2 and \"nearly 6x M1\" for M1 Max's 400GB/s",
        fp32_tflops: Some(2.6),
        fp32_source: "Apple Newsroom, 2020-11-10, \"Apple unleashes M1\": \"2.6 teraflops of throughput\" (apple.com/newsroom/2020/11/apple-unleashes-m1/)",
    },
    Gpu {
        key: "m1-pro",
        name: "Apple M1 Pro (16-core GPU)",
        gpu_cores: 16,
        bandwidth_gb_s: 200.0,
        bandwidth_source: NEWSROOM_M1_PRO_MAX,
        fp32_tflops: Some(5.2),
        fp32_source: EVENT_M1_PRO_MAX,
    },
    Gpu {
        key: "m1-max",
        name: "Apple M1 Max (32-core GPU)",
        gpu_cores: 32,
        bandwidth_gb_s: 400.0,
        bandwidth_source: NEWSROOM_M1_PRO_MAX,
        fp32_tflops: Some(10.4),
        fp32_source: EVENT_M1_PRO_MAX,
    },
    Gpu {
        key: "m1-ultra",
        name: "Apple M1 Ultra (64-core GPU)",
        gpu_cores: 64,
        bandwidth_gb_s: 800.0,
        bandwidth_source: "Apple Newsroom, 2022-03-08, \"Apple unveils M1 Ultra, the world's most powerful chip for a personal computer\" (apple.com/newsroom/2022/03/)",
        fp32_tflops: derived(64, 1.296),
        fp32_source: "not stated in Apple's newsroom text; derived: two M1 Max dies, 64 x 128 x 2 x 1.296 GHz = 21.2 TFLOPS (cpu-monkey.com lists 21.2)",
    },
    Gpu {
        key: "m2",
        name: "Apple M2 (10-core GPU)",
        gpu_cores: 10,
        bandwidth_gb_s: 100.0,
        bandwidth_source: "Apple Newsroom, 2022-06-06, \"Apple unveils M2 with breakthrough performance and capabilities\" (apple.com/newsroom/2022/06/)",
        fp32_tflops: derived(10, 1.398),
        fp32_source: CLOCK_M2,
    },
    Gpu {
        key: "m2-pro",
        name: "Apple M2 Pro (19-core GPU)",
        gpu_cores: 19,
        bandwidth_gb_s: 200.0,
        bandwidth_source: NEWSROOM_M2_PRO_MAX,
        fp32_tflops: derived(19, 1.398),
        fp32_source: CLOCK_M2,
    },
    Gpu {
        key: "m2-max",
        name: "Apple M2 Max (38-core GPU)",
        gpu_cores: 38,
        bandwidth_gb_s: 400.0,
        bandwidth_source: NEWSROOM_M2_PRO_MAX,
        fp32_tflops: derived(38, 1.398),
        fp32_source: CLOCK_M2,
    },
    Gpu {
        key: "m2-ultra",
        name: "Apple M2 Ultra (76-core GPU)",
        gpu_cores: 76,
        bandwidth_gb_s: 800.0,
        bandwidth_source: "Apple Newsroom, 2023-06-05, \"Apple introduces M2 Ultra\" (apple.com/newsroom/2023/06/apple-introduces-m2-ultra/)",
        fp32_tflops: Some(27.2),
        fp32_source: "Apple's Mac Pro (2023) page: \"up to 27.2 teraflops\" for the 76-core GPU (apple.com/mac-pro/)",
    },
    Gpu {
        key: "m3",
        name: "Apple M3 (10-core GPU)",
        gpu_cores: 10,
        bandwidth_gb_s: 100.0,
        bandwidth_source: NEWSROOM_M3,
        fp32_tflops: derived(10, 1.398),
        fp32_source: CLOCK_M3,
    },
    Gpu {
        key: "m3-pro",
        name: "Apple M3 Pro (18-core GPU)",
        gpu_cores: 18,
        bandwidth_gb_s: 150.0,
        bandwidth_source: NEWSROOM_M3,
        fp32_tflops: derived(18, 1.398),
        fp32_source: CLOCK_M3,
    },
    Gpu {
        key: "m3-max",
        name: "Apple M3 Max (40-core GPU)",
        gpu_cores: 40,
        bandwidth_gb_s: 400.0,
        bandwidth_source: NEWSROOM_M3,
        fp32_tflops: derived(40, 1.398),
        fp32_source: CLOCK_M3,
    },
    Gpu {
        key: "m3-max-30c",
        name: "Apple M3 Max (30-core GPU)",
        gpu_cores: 30,
        bandwidth_gb_s: 300.0,
        bandwidth_source: "the MacBook Pro (M3, 2023) tech specs page: 300GB/s for the 30-core-GPU M3 Max (apple.com/macbook-pro/specs/ of that year)",
        fp32_tflops: derived(30, 1.398),
        fp32_source: CLOCK_M3,
    },
    Gpu {
        key: "m3-ultra",
        name: "Apple M3 Ultra (80-core GPU)",
        gpu_cores: 80,
        bandwidth_gb_s: 819.0,
        bandwidth_source: "Apple Newsroom, 2025-03-05, \"Apple reveals M3 Ultra, taking Apple silicon to a new extreme\" (\"over 800GB/s\"), and the Mac Studio (2025) tech specs page: 819GB/s",
        fp32_tflops: derived(80, 1.398),
        fp32_source: CLOCK_M3,
    },
    Gpu {
        key: "m4",
        name: "Apple M4 (10-core GPU)",
        gpu_cores: 10,
        bandwidth_gb_s: 120.0,
        bandwidth_source: "Apple Newsroom, 2024-05-07, \"Apple introduces M4 chip\" (apple.com/newsroom/2024/05/apple-introduces-m4-chip/)",
        fp32_tflops: derived(10, 1.47),
        fp32_source: CLOCK_M4,
    },
    Gpu {
        key: "m4-pro",
        name: "Apple M4 Pro (20-core GPU)",
        gpu_cores: 20,
        bandwidth_gb_s: 273.0,
        bandwidth_source: NEWSROOM_M4_PRO_MAX,
        fp32_tflops: derived(20, 1.47),
        fp32_source: CLOCK_M4,
    },
    Gpu {
        key: "m4-max",
        name: "Apple M4 Max (40-core GPU)",
        gpu_cores: 40,
        bandwidth_gb_s: 546.0,
        bandwidth_source: NEWSROOM_M4_PRO_MAX,
        fp32_tflops: derived(40, 1.47),
        fp32_source: CLOCK_M4,
    },
    Gpu {
        key: "m4-max-32c",
        name: "Apple M4 Max (32-core GPU)",
        gpu_cores: 32,
        bandwidth_gb_s: 410.0,
        bandwidth_source: "the MacBook Pro (M4, 2024) tech specs page: 410GB/s for the 32-core-GPU M4 Max (apple.com/macbook-pro/specs/)",
        fp32_tflops: derived(32, 1.47),
        fp32_source: CLOCK_M4,
    },
    Gpu {
        key: "m5",
        name: "Apple M5 (10-core GPU)",
        gpu_cores: 10,
        bandwidth_gb_s: 153.0,
        bandwidth_source: "Apple Newsroom, 2025-10-15, \"Apple unleashes M5\" (153GB/s unified memory bandwidth)",
        fp32_tflops: None,
        fp32_source: "not published by Apple (it quotes AI compute of the GPU's neural accelerators, not FP32), and no GPU clock figure was found: memory-only roofline",
    },
];

/// The GPU `kernelgen list` and `kernelgen diff` use unless `--gpu` says:
/// a common machine for MLX work, in the middle of the table's bandwidths.
pub const DEFAULT_GPU: &str = "m2-max";

/// The GPU for a `--gpu` value: its key, case and separators aside
/// (`M2 Max`, `m2_max`, `m2max` all name `m2-max`).
pub fn find(name: &str) -> Option<&'static Gpu> {
    let norm = |s: &str| s.chars().filter(|c| c.is_ascii_alphanumeric()).map(|c| c.to_ascii_lowercase()).collect::<String>();
    let want = norm(name.strip_prefix("apple").or_else(|| name.strip_prefix("Apple")).unwrap_or(name));
    GPUS.iter().find(|g| norm(g.key) == want)
}

/// The keys, for messages.
pub fn keys() -> String {
    GPUS.iter().map(|g| g.key).collect::<Vec<_>>().join(", ")
}

/// What limits a launch's roofline time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// Streaming the bytes takes at least as long as the flops.
    Memory,
    /// The flops take longer than streaming the bytes.
    Compute,
    /// No flops known (the family states none, or the GPU has no FP32 figure).
    MemoryOnly,
}

/// A roofline estimate of one launch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Roofline {
    /// The lower bound on the launch's time, in seconds.
    pub seconds: f64,
    /// Which side of the roofline sets it.
    pub bound: Bound,
}

impl Roofline {
    /// `12.3 µs (memory)`.
    pub fn describe(&self) -> String {
        let bound = match self.bound {
            Bound::Memory => "memory",
            Bound::Compute => "compute",
            Bound::MemoryOnly => "memory; no flops",
        };
        format!("{} ({bound})", seconds(self.seconds))
    }
}

impl Gpu {
    /// `max(bytes / bandwidth, flops / peak)`.
    pub fn roofline(&self, bytes: u64, flops: Option<u64>) -> Roofline {
        let memory = bytes as f64 / (self.bandwidth_gb_s * 1e9);
        match (flops, self.fp32_tflops) {
            (Some(f), Some(peak)) => {
                let compute = f as f64 / (peak * 1e12);
                if compute > memory {
                    Roofline { seconds: compute, bound: Bound::Compute }
                } else {
                    Roofline { seconds: memory, bound: Bound::Memory }
                }
            }
            _ => Roofline { seconds: memory, bound: Bound::MemoryOnly },
        }
    }

    /// `Apple M2 Max (38-core GPU): 400 GB/s, 13.6 TFLOPS FP32`.
    pub fn summary(&self) -> String {
        let flops = match self.fp32_tflops {
            Some(t) => format!("{t:.1} TFLOPS FP32"),
            None => "no FP32 figure".into(),
        };
        format!("{}: {} GB/s, {flops}", self.name, trim_float(self.bandwidth_gb_s))
    }
}

fn trim_float(x: f64) -> String {
    let s = format!("{x:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A duration with three significant digits: `812 ns`, `12.3 µs`, `4.56 ms`, `1.20 s`.
pub fn seconds(s: f64) -> String {
    let (value, unit) = if s < 1e-6 {
        (s * 1e9, "ns")
    } else if s < 1e-3 {
        (s * 1e6, "µs")
    } else if s < 1.0 {
        (s * 1e3, "ms")
    } else {
        (s, "s")
    };
    let digits = if value >= 100.0 { 0 } else if value >= 10.0 { 1 } else { 2 };
    format!("{value:.digits$} {unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_complete_and_consistent() {
        for chip in ["m1", "m2", "m3", "m4"] {
            for tier in ["", "-pro", "-max"] {
                assert!(find(&format!("{chip}{tier}")).is_some(), "{chip}{tier}");
            }
        }
        for ultra in ["m1-ultra", "m2-ultra", "m3-ultra"] {
            assert!(find(ultra).is_some());
        }
        let mut keys: Vec<&str> = GPUS.iter().map(|g| g.key).collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), GPUS.len(), "keys are unique");
        for g in GPUS {
            assert!(g.bandwidth_gb_s > 0.0 && !g.bandwidth_source.is_empty() && !g.fp32_source.is_empty(), "{}", g.key);
            assert!(g.name.contains(&format!("{}-core", g.gpu_cores)), "{}", g.key);
            if let Some(t) = g.fp32_tflops {
                // Within 5% of cores x 128 x 2 x a 1.25 to 1.6 GHz clock.
                let per_core_ghz = t * 1000.0 / (g.gpu_cores as f64 * 256.0);
                assert!((1.2..1.65).contains(&per_core_ghz), "{}: {per_core_ghz}", g.key);
            }
        }
        // Apple's published figures are reproduced by the derivation.
        assert!((derived(8, 1.278).unwrap() - 2.6).abs() < 0.05);
        assert!((derived(76, 1.398).unwrap() - 27.2).abs() < 0.05);
        assert!(find(DEFAULT_GPU).is_some());
        assert_eq!(find("Apple M2 Max").unwrap().key, "m2-max");
        assert_eq!(find("M4_PRO").unwrap().key, "m4-pro");
        assert!(find("m9").is_none());
    }

    #[test]
    fn roofline_takes_the_slower_side() {
        let g = find("m2-max").unwrap();
        // 400 MB at 400 GB/s is 1 ms; 1 GFLOP at 13.6 TFLOPS is 73.5 µs.
        let r = g.roofline(400_000_000, Some(1_000_000_000));
        assert_eq!(r.bound, Bound::Memory);
        assert!((r.seconds - 1e-3).abs() < 1e-12);
        let r = g.roofline(4_000, Some(1_000_000_000));
        assert_eq!(r.bound, Bound::Compute);
        assert!((r.seconds - 1e9 / (38.0 * 256.0 * 1.398e9)).abs() < 1e-12);
        assert_eq!(g.roofline(4_000, None).bound, Bound::MemoryOnly);
        assert_eq!(find("m5").unwrap().roofline(1, Some(1)).bound, Bound::MemoryOnly);
        assert_eq!(seconds(1e-3), "1.00 ms");
        assert_eq!(seconds(12.34e-6), "12.3 µs");
        assert_eq!(seconds(812e-9), "812 ns");
        assert_eq!(seconds(2.0), "2.00 s");
        assert_eq!(g.summary(), "Apple M2 Max (38-core GPU): 400 GB/s, 13.6 TFLOPS FP32");
    }
}
