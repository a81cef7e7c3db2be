//! The emulator backend's memory: an input in guarded memory is bound in place (no copy),
//! any other input is copied once; every input is read-only while the kernel runs (a write
//! faults, naming the buffer, and leaves the caller's array as it was); a large output comes
//! back in guarded memory and is bound in place by the next launch.

use half::bf16;
use kernelgen::backend;
use kernelgen::contract::KernelDef;
use kernelgen::kernels::experts::TINY_EXPERT_Q4_BF16_R4_GATE_UP;
use kernelgen::kernels::gated_rms_norm::HEAD128_GATED_RMS_NORM_BF16;
use kernelgen_emu::{DeviceBuffer, Dispatch, EmuBackend, EmuError, EmuOptions, GUARDED_MIN_BYTES, HostArray, RunOrder};
use kernelgen_reference::expert::{ExpertGeometry, ExpertWeights, Quant};
use std::borrow::Cow;

use crate::common;

const H: usize = 256;
const I: usize = 128;
const SLOT: usize = 73728;

fn slot() -> Vec<u8> {
    let g = ExpertGeometry {
        hidden: H,
        intermediate: I,
        gate_weights: 0,
        up_weights: 20480,
        down_weights: 40960,
        gate_scales: 61440,
        up_scales: 65536,
        down_scales: 69632,
        slot_bytes: SLOT,
    };
    ExpertWeights::random(Quant::Q4, H, I, 11).pack(Quant::Q4, &g)
}

fn x(m: usize) -> Vec<bf16> {
    (0..m * H).map(|i| bf16::from_f32((i % 17) as f32 / 8.0 - 1.0)).collect()
}

/// The same input bytes, in guarded memory.
fn guarded(a: &HostArray) -> HostArray {
    let mut g = HostArray::guarded(a.dtype, a.shape.clone());
    g.data.copy_from_slice(&a.data);
    assert!(g.data.is_guarded());
    g
}

#[test]
fn guarded_inputs_give_the_same_outputs_as_copied_ones() {
    let emu = EmuBackend::with_defaults().unwrap();
    let xs = HostArray::from_bf16(vec![2, H as u64], &x(2));
    let s = HostArray::from_u8(vec![SLOT as u64], slot());
    let def = &TINY_EXPERT_Q4_BF16_R4_GATE_UP;
    let copied = backend::launch_vec(&emu, def, &[&xs, &s], &[]).unwrap();
    // x is bound in place; the slot has declared regions (poisoned gaps), so it is copied
    let (gx, gs) = (guarded(&xs), guarded(&s));
    let in_place = backend::launch_vec(&emu, def, &[&gx, &gs], &[]).unwrap();
    assert_eq!(copied, in_place);
    assert_eq!(gx, xs, "the input is as it was");
}

/// The tiny gate/up kernel, changed to write into its input `x`.
fn writes_its_input() -> KernelDef {
    let mut d = TINY_EXPERT_Q4_BF16_R4_GATE_UP.clone();
    let marker = "  const uint lane = thread_index_in_simdgroup;";
    assert!(d.metal.contains(marker));
    d.metal = Cow::Owned(d.metal.replacen(
        marker,
        &format!("{marker} if (lane == 3u) ((device bfloat16_t*)x)[lane] = bfloat16_t(9.0f); // @write-input"),
        1,
    ));
    d.name = Cow::Borrowed("tiny_expert_writes_its_input");
    d
}

#[test]
fn a_write_to_an_input_faults_whether_it_is_bound_in_place_or_copied() {
    let emu = EmuBackend::with_defaults().unwrap();
    let def = writes_its_input();
    let xs = HostArray::from_bf16(vec![2, H as u64], &x(2));
    let s = HostArray::from_u8(vec![SLOT as u64], slot());
    let gx = guarded(&xs);
    for x in [&xs, &gx] {
        let e = backend::launch_vec(&emu, &def, &[x, &s], &[]).unwrap_err();
        let msg = format!("{e} {:?}", std::error::Error::source(&e).map(|s| s.to_string()));
        assert!(msg.contains("invalid write") && msg.contains("buffer(0) `x`"), "{msg}");
        assert_eq!(*x, xs, "the caller's array is as it was");
    }
    // and the emulator still runs the kernel's inputs in place afterwards
    let good = backend::launch_vec(&emu, &TINY_EXPERT_Q4_BF16_R4_GATE_UP, &[&gx, &s], &[]).unwrap();
    assert_eq!(good, backend::launch_vec(&emu, &TINY_EXPERT_Q4_BF16_R4_GATE_UP, &[&xs, &s], &[]).unwrap());
    // writable again once no launch holds it
    let mut gx = gx;
    gx.data[0] = 1;
    assert_eq!(gx.data[0], 1);
}

#[test]
fn a_large_output_comes_back_guarded_and_is_bound_in_place_next() {
    let emu = EmuBackend::with_defaults().unwrap();
    let def = &HEAD128_GATED_RMS_NORM_BF16;
    let rows = GUARDED_MIN_BYTES / (128 * 2);
    let x = HostArray::zeros(kernelgen::Dtype::Bf16, vec![rows as u64, 128]);
    assert!(x.data.is_guarded(), "zeros of 16 MiB and more are guarded");
    let gate = HostArray::zeros(kernelgen::Dtype::Bf16, vec![rows as u64, 128]);
    let w = HostArray::from_bf16(vec![128], &vec![bf16::from_f32(1.0); 128]);
    let [out]: [HostArray; 1] = backend::launch_vec(&emu, def, &[&x, &gate, &w], &[]).unwrap().try_into().unwrap();
    assert!(out.data.is_guarded(), "a 16 MiB output is not copied out");
    assert!(out.data.iter().all(|&b| b == 0), "x = 0 gives 0 everywhere");
    // the output is an input of the next launch
    let [again]: [HostArray; 1] = backend::launch_vec(&emu, def, &[&out, &gate, &w], &[]).unwrap().try_into().unwrap();
    assert_eq!(again, out);
    // a small output is an ordinary vector
    let x = HostArray::from_bf16(vec![2, 128], &vec![bf16::from_f32(0.5); 256]);
    let [small]: [HostArray; 1] = backend::launch_vec(&emu, def, &[&x, &x, &w], &[]).unwrap().try_into().unwrap();
    assert!(!small.data.is_guarded());
}

/// A large input is copied into its device buffer in parts, on several threads: every byte
/// lands where it belongs, whatever the parts' boundaries (at, around and far above the
/// size where the copy starts to split).
#[test]
fn a_copy_in_parts_is_the_input_byte_for_byte() {
    for (len, threads) in [(4 << 20, 2), ((4 << 20) - 1, 2), ((4 << 20) + 4095, 3), ((9 << 20) + 1, 2), (5 << 20, 7), (1, 4)] {
        let src: Vec<u8> = (0..len).map(|i| (i * 7 + i / 4096) as u8).collect();
        let d = kernelgen_emu::DeviceBuffer::try_from_bytes_on(&src, 16, threads).unwrap();
        assert!(d.as_bytes() == &src[..], "{len} bytes copied on {threads} threads differ");
    }
}

/// A buffer of a size no address space holds is an error, not a panic.
#[test]
fn a_buffer_too_large_for_the_address_space_is_an_error() {
    for bytes in [usize::MAX, usize::MAX - 4096, 1 << 50] {
        match DeviceBuffer::try_zeroed_aligned(bytes, 16) {
            Err(EmuError::Memory { what }) => assert!(what.contains(&format!("{bytes}-byte buffer")), "{what}"),
            Err(e) => panic!("{bytes} bytes: expected a memory error, got {e}"),
            Ok(_) => panic!("a buffer of {bytes} bytes was mapped"),
        }
    }
}

/// The address space this process has mapped, in bytes.
fn mapped_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: u64 = statm.split_whitespace().next().and_then(|p| p.parse().ok()).expect("statm's size");
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64
}

fn set_address_space_limit(bytes: u64) {
    let limit = libc::rlimit { rlim_cur: bytes, rlim_max: libc::RLIM_INFINITY };
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &limit) }, 0, "setrlimit");
}

/// With the address space nearly exhausted (`ulimit -v`, in a child process), every mapping
/// a launch needs and cannot have is an error naming it: an input's copy, an output, a
/// buffer, the fiber stacks of a large threadgroup; and once memory is back, the emulator
/// runs as before.
#[test]
fn a_launch_out_of_address_space_is_an_error_not_a_panic() {
    const CHILD: &str = "KGEMU_TEST_ADDRESS_SPACE_CHILD";
    if std::env::var_os(CHILD).is_none() {
        let (_, stderr) = common::run_in_child(module_path!(), "a_launch_out_of_address_space_is_an_error_not_a_panic", &[(CHILD, "1")]);
        assert!(!stderr.contains("panicked"), "{stderr}");
        return;
    }
    let emu = EmuBackend::new(EmuOptions { workers: 1, ..EmuOptions::default() }).unwrap();
    let def = &HEAD128_GATED_RMS_NORM_BF16;
    // 256 MiB inputs: x on the heap (copied by a launch) or in guarded memory (bound in place)
    let rows = (256u64 << 20) / (128 * 2);
    let heap_x = HostArray::new(kernelgen::Dtype::Bf16, vec![rows, 128], vec![0; (rows * 256) as usize]);
    let guarded_x = HostArray::guarded(kernelgen::Dtype::Bf16, vec![rows, 128]);
    let w = HostArray::from_bf16(vec![128], &vec![bf16::from_f32(1.0); 128]);
    let small = HostArray::from_bf16(vec![2, 128], &vec![bf16::from_f32(0.5); 256]);
    // a kernel of 1024-thread threadgroups: 1024 fiber stacks
    let wide = kernelgen_emu::Emulator::new(EmuOptions::default())
        .unwrap()
        .load("[[kernel]] void wide(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) { x[i] = 1.0f; }", "wide.metal")
        .unwrap();
    let mut out = DeviceBuffer::zeroed(1024 * 4);
    let run_wide = |out: &mut DeviceBuffer| wide.run(&Dispatch::new("wide", [1024, 1, 1], [1024, 1, 1]).order(RunOrder::Forward).workers(1), &mut [out]);
    // everything a launch keeps (the program, this thread's stacks, signal stack and
    // threadgroup memory) exists before the limit
    backend::launch_vec(&emu, def, &[&small, &small, &w], &[]).unwrap();

    let memory_error = |r: Result<Vec<HostArray>, kernelgen::launch::LaunchError>, what: &str| {
        let e = r.err().unwrap_or_else(|| panic!("{what}: the launch ran"));
        let msg = format!("{e}: {:?}", std::error::Error::source(&e).map(|s| s.to_string()));
        assert!(msg.contains("out of memory"), "{what}: {msg}");
    };
    set_address_space_limit(mapped_bytes() + (64 << 20));
    memory_error(backend::launch_vec(&emu, def, &[&heap_x, &guarded_x, &w], &[]), "a 256 MiB input's copy");
    memory_error(backend::launch_vec(&emu, def, &[&guarded_x, &guarded_x, &w], &[]), "a 256 MiB output");
    match DeviceBuffer::try_zeroed_aligned(256 << 20, 16) {
        Err(EmuError::Memory { what }) => assert!(what.contains("268435456-byte buffer"), "{what}"),
        other => panic!("a 256 MiB buffer: {:?}", other.map(|_| ())),
    }
    match run_wide(&mut out) {
        Err(EmuError::Memory { what }) => assert!(what.contains("fiber stack"), "{what}"),
        other => panic!("1024 fiber stacks: {:?}", other.map(|_| ())),
    }
    // memory back: the emulator runs as before
    set_address_space_limit(libc::RLIM_INFINITY);
    run_wide(&mut out).unwrap();
    assert!(out.as_bytes().chunks(4).all(|c| c == 1.0f32.to_le_bytes()));
    backend::launch_vec(&emu, def, &[&small, &small, &w], &[]).unwrap();
}
