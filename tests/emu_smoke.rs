use kernelgen::emu::*;

fn f32s(b: &DeviceBuffer) -> Vec<f32> {
    b.as_bytes().chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

#[test]
fn smoke() {
    let emu = Emulator::new(EmuOptions::default()).unwrap();
    let src = "#include <metal_stdlib>\nusing namespace metal;\n[[kernel]] void twice(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]], uint lane [[thread_index_in_simdgroup]]) {\n  float s = simd_sum(x[i]);\n  x[i] = s + float(lane);\n}\n";
    let t = std::time::Instant::now();
    let p = emu.load(src, "twice.metal").unwrap_or_else(|e| panic!("{e}"));
    eprintln!("load {:?} compiled={}", t.elapsed(), p.was_compiled());
    let mut x = DeviceBuffer::from_bytes(&(0..64).flat_map(|i| (i as f32).to_le_bytes()).collect::<Vec<u8>>());
    let st = p.dispatch("twice", &mut [&mut x], [64, 1, 1], [64, 1, 1]).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{st:?}");
    let v = f32s(&x);
    assert_eq!(v[0], (0..32).sum::<i32>() as f32);
    assert_eq!(v[33], (32..64).sum::<i32>() as f32 + 1.0);
}
