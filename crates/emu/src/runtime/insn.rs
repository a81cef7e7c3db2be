//! The memory access of the x86-64 instruction that raised a general-protection fault.
//!
//! A page fault tells the handler its address (`si_addr`) and whether it was a write (the
//! error code); a general-protection fault (a non-canonical address, a misaligned `movaps`)
//! tells neither: `si_addr` is 0. So the handler decodes the faulting instruction: its
//! memory operand (base + index * scale + displacement, from the saved registers) and
//! whether the instruction writes it. Only what compiled kernels use is decoded (legacy,
//! REX and VEX encodings; EVEX and string instructions give no address); anything else
//! answers `None`, never a guess.

/// The memory operand of a faulting instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Access {
    /// The instruction writes its memory operand (a store, or a read-modify-write).
    pub(super) write: bool,
    /// The operand's address; `None` where it cannot be computed (RIP-relative, a segment
    /// override, a vector index, an EVEX compressed displacement).
    pub(super) addr: Option<usize>,
}

/// The general-purpose registers, in the encoding's order (rax, rcx, rdx, rbx, rsp, rbp,
/// rsi, rdi, r8..r15), from a signal's saved context.
pub(super) fn registers(gregs: &[libc::greg_t]) -> [u64; 16] {
    let order = [
        libc::REG_RAX,
        libc::REG_RCX,
        libc::REG_RDX,
        libc::REG_RBX,
        libc::REG_RSP,
        libc::REG_RBP,
        libc::REG_RSI,
        libc::REG_RDI,
        libc::REG_R8,
        libc::REG_R9,
        libc::REG_R10,
        libc::REG_R11,
        libc::REG_R12,
        libc::REG_R13,
        libc::REG_R14,
        libc::REG_R15,
    ];
    order.map(|r| gregs[r as usize] as u64)
}

/// Whether `addr` is canonical: bits 63..47 all equal (what a 4-level page table maps).
pub(super) fn canonical(addr: usize) -> bool {
    ((addr as i64) << 16 >> 16) as usize == addr
}

/// Decode the instruction in `code` (its first bytes; at most 15 are read) with the
/// registers `regs`.
pub(super) fn decode(code: &[u8], regs: &[u64; 16]) -> Option<Access> {
    let mut at = 0;
    let byte = |i: usize| code.get(i).copied();
    // legacy prefixes
    let (mut pp, mut addr32, mut segment) = (0u8, false, false);
    loop {
        match byte(at)? {
            0x66 => pp = 1,
            0xF3 => pp = 2,
            0xF2 => pp = 3,
            0x67 => addr32 = true,
            0x64 | 0x65 => segment = true,
            0xF0 | 0x2E | 0x36 | 0x3E | 0x26 => {}
            _ => break,
        }
        at += 1;
        if at >= 15 {
            return None;
        }
    }
    let (mut rex_x, mut rex_b) = (false, false);
    let mut evex = false;
    let (map, opcode) = match byte(at)? {
        b @ 0x40..=0x4F => {
            (rex_x, rex_b) = (b & 2 != 0, b & 1 != 0);
            at += 1;
            legacy_opcode(code, &mut at)?
        }
        0xC5 => {
            pp = byte(at + 1)? & 3;
            at += 3;
            (1, byte(at - 1)?)
        }
        0xC4 => {
            let (p1, p2) = (byte(at + 1)?, byte(at + 2)?);
            (rex_x, rex_b) = (p1 & 0x40 == 0, p1 & 0x20 == 0);
            pp = p2 & 3;
            at += 4;
            (p1 & 0x1F, byte(at - 1)?)
        }
        0x62 => {
            let (p0, p1) = (byte(at + 1)?, byte(at + 2)?);
            (rex_x, rex_b) = (p0 & 0x40 == 0, p0 & 0x20 == 0);
            pp = p1 & 3;
            evex = true;
            at += 5;
            (p0 & 0x07, byte(at - 1)?)
        }
        _ => legacy_opcode(code, &mut at)?,
    };
    if map == 0 {
        // string instructions: the operand is [rdi] (stores) or [rsi] (loads)
        match opcode {
            0xAA | 0xAB => return Some(Access { write: true, addr: (!segment).then_some(regs[7] as usize) }),
            0xAC | 0xAD => return Some(Access { write: false, addr: (!segment).then_some(regs[6] as usize) }),
            _ => {}
        }
    }
    let modrm = byte(at)?;
    at += 1;
    let (md, reg, rm) = (modrm >> 6, (modrm >> 3) & 7, modrm & 7);
    if md == 3 {
        return None; // no memory operand
    }
    let write = writes(map, opcode, pp, reg)?;
    // VSIB (gathers): the index is a vector register
    let vsib = map == 2 && (0x90..=0x93).contains(&opcode);
    let mut addr: Option<u64> = Some(0);
    let mut disp_from = at;
    if rm == 4 {
        let sib = byte(at)?;
        at += 1;
        disp_from = at;
        let (scale, index, base) = (sib >> 6, ((sib >> 3) & 7) | (u8::from(rex_x) << 3), sib & 7);
        if index != 4 {
            addr = if vsib { None } else { addr.map(|a| a.wrapping_add(regs[index as usize] << scale)) };
        }
        if !(base == 5 && md == 0) {
            addr = addr.map(|a| a.wrapping_add(regs[(base | (u8::from(rex_b) << 3)) as usize]));
        } else {
            // no base: a 32-bit displacement follows
            addr = addr.and_then(|a| Some(a.wrapping_add(disp32(code, disp_from)? as u64)));
            return Some(Access { write, addr: finish(addr, addr32, segment) });
        }
    } else if rm == 5 && md == 0 {
        // RIP-relative: the next instruction's address depends on the immediate's length
        return Some(Access { write, addr: None });
    } else {
        addr = addr.map(|a| a.wrapping_add(regs[(rm | (u8::from(rex_b) << 3)) as usize]));
    }
    match md {
        1 if evex => addr = None, // disp8 scaled by the operand size
        1 => addr = addr.and_then(|a| Some(a.wrapping_add(byte(disp_from)? as i8 as i64 as u64))),
        2 => addr = addr.and_then(|a| Some(a.wrapping_add(disp32(code, disp_from)? as u64))),
        _ => {}
    }
    Some(Access { write, addr: finish(addr, addr32, segment) })
}

/// The opcode of a legacy-encoded instruction at `*at`: (map, opcode), map 0 the one-byte
/// opcodes, 1 `0F`, 2 `0F 38`, 3 `0F 3A` (the VEX maps' numbers).
fn legacy_opcode(code: &[u8], at: &mut usize) -> Option<(u8, u8)> {
    let b = *code.get(*at)?;
    *at += 1;
    if b != 0x0F {
        return Some((0, b));
    }
    let b = *code.get(*at)?;
    *at += 1;
    match b {
        0x38 | 0x3A => {
            let op = *code.get(*at)?;
            *at += 1;
            Some((if b == 0x38 { 2 } else { 3 }, op))
        }
        _ => Some((1, b)),
    }
}

fn disp32(code: &[u8], at: usize) -> Option<i64> {
    Some(i32::from_le_bytes(code.get(at..at + 4)?.try_into().ok()?) as i64)
}

fn finish(addr: Option<u64>, addr32: bool, segment: bool) -> Option<usize> {
    if segment {
        return None; // relative to a segment base the context does not hold
    }
    addr.map(|a| if addr32 { a as u32 as usize } else { a as usize })
}

/// Whether the instruction (`map`, `opcode`, its mandatory prefix `pp`: 0 none, 1 `66`, 2
/// `F3`, 3 `F2`, and ModRM's `reg` field) writes its memory operand; `None` for an opcode
/// not known here.
fn writes(map: u8, opcode: u8, pp: u8, reg: u8) -> Option<bool> {
    Some(match (map, opcode) {
        // ALU r/m, r (read-modify-write); CMP and TEST read
        (0, 0x00..=0x3F) => match opcode & 7 {
            0 | 1 => opcode & 0x38 != 0x38,
            2 | 3 => false,
            _ => return None,
        },
        (0, 0x63) | (0, 0x69) | (0, 0x6B) | (0, 0x84) | (0, 0x85) | (0, 0x8A) | (0, 0x8B) => false,
        (0, 0x80..=0x83) => reg != 7,
        (0, 0x86..=0x89) | (0, 0x8C) | (0, 0xC6) | (0, 0xC7) => true,
        (0, 0x8F) => true,
        (0, 0xC0) | (0, 0xC1) | (0, 0xD0..=0xD3) => true,
        (0, 0xF6) | (0, 0xF7) => reg == 2 || reg == 3,
        (0, 0xFE) | (0, 0xFF) => reg <= 1,
        (0, 0xD8..=0xDF) => return None, // x87
        (0, _) => return None,
        // 0F: the SSE/AVX stores and the read-modify-writes
        (1, 0x11) | (1, 0x13) | (1, 0x17) | (1, 0x29) | (1, 0x2B) => true,
        (1, 0x7E) => pp != 2, // F3 0F 7E is movq xmm, m64 (a load)
        (1, 0x7F) | (1, 0x90..=0x9F) | (1, 0xAB) | (1, 0xB3) | (1, 0xBB) => true,
        (1, 0xB0) | (1, 0xB1) | (1, 0xC0) | (1, 0xC1) | (1, 0xC3) | (1, 0xE7) => true,
        (1, 0xBA) => reg >= 5,
        (1, 0xC7) => reg == 1,
        (1, 0xD6) => pp == 1,
        (1, 0xAE) => matches!(reg, 0 | 3 | 4 | 6 | 7),
        (1, _) => false,
        // 0F 38: masked stores, movbe m, r
        (2, 0x2E) | (2, 0x2F) | (2, 0x8E) => true,
        (2, 0xF1) => pp != 3,
        (2, 0xA0..=0xA3) => true, // scatters (EVEX)
        (2, _) => false,
        // 0F 3A: extracts to memory, vcvtps2ph
        (3, 0x14..=0x17) | (3, 0x19) | (3, 0x1D) | (3, 0x39) | (3, 0x3B) => true,
        (3, _) => false,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Registers with rax = 0x1000, rcx = 3, rdx = 0x7000_0000_0000, rsi = 0x10, rdi =
    /// 0x2000, r8 = 8, r13 = 0x4000, the others 0.
    fn regs() -> [u64; 16] {
        let mut r = [0u64; 16];
        r[0] = 0x1000;
        r[1] = 3;
        r[2] = 0x7000_0000_0000;
        r[6] = 0x10;
        r[7] = 0x2000;
        r[8] = 8;
        r[13] = 0x4000;
        r
    }

    fn at(bytes: &[u8]) -> Option<Access> {
        decode(bytes, &regs())
    }

    fn w(addr: usize) -> Option<Access> {
        Some(Access { write: true, addr: Some(addr) })
    }

    fn r(addr: usize) -> Option<Access> {
        Some(Access { write: false, addr: Some(addr) })
    }

    /// What g++ emits for kernels' loads and stores, in every encoding it uses.
    #[test]
    fn loads_and_stores_and_their_addresses() {
        // mov dword [rax+rcx*4], 0x3f800000
        assert_eq!(at(&[0xC7, 0x04, 0x88, 0x00, 0x00, 0x80, 0x3F]), w(0x1000 + 12));
        // mov eax, [rdx+rax*4+0x10]
        assert_eq!(at(&[0x8B, 0x44, 0x82, 0x10]), r(0x7000_0000_0000 + 0x4000 + 0x10));
        // mov [r13+0x100], rax (REX.W.B, disp32)
        assert_eq!(at(&[0x49, 0x89, 0x85, 0x00, 0x01, 0x00, 0x00]), w(0x4100));
        // mov rax, [r8+r13*1-8] (REX.W.X.B: index r13, base r8)
        assert_eq!(at(&[0x4B, 0x8B, 0x44, 0x28, 0xF8]), r(8 + 0x4000 - 8));
        // movss xmm0, [rax] / movss [rax], xmm0 (F3 0F 10 / 11)
        assert_eq!(at(&[0xF3, 0x0F, 0x10, 0x00]), r(0x1000));
        assert_eq!(at(&[0xF3, 0x0F, 0x11, 0x00]), w(0x1000));
        // vmovss xmm0, [rdx+rcx*4] / vmovss [rdx+rcx*4], xmm0 (VEX 2-byte)
        assert_eq!(at(&[0xC5, 0xFA, 0x10, 0x04, 0x8A]), r(0x7000_0000_000C));
        assert_eq!(at(&[0xC5, 0xFA, 0x11, 0x04, 0x8A]), w(0x7000_0000_000C));
        // vmovups [r13], ymm1 (VEX 3-byte, B) and vmovaps ymm1, [r13]
        assert_eq!(at(&[0xC4, 0xC1, 0x7C, 0x11, 0x4D, 0x00]), w(0x4000));
        assert_eq!(at(&[0xC4, 0xC1, 0x7C, 0x28, 0x4D, 0x00]), r(0x4000));
        // movq xmm0, [rax] (F3 0F 7E: a load) and movq [rax], xmm0 (66 0F D6: a store)
        assert_eq!(at(&[0xF3, 0x0F, 0x7E, 0x00]), r(0x1000));
        assert_eq!(at(&[0x66, 0x0F, 0xD6, 0x00]), w(0x1000));
        // add [rax], ecx (read-modify-write) and cmp [rax], ecx (a read)
        assert_eq!(at(&[0x01, 0x08]), w(0x1000));
        assert_eq!(at(&[0x39, 0x08]), r(0x1000));
        // lock xadd [rdi], eax; vfmadd231ps ymm0, ymm1, [rsi+0x20] (VEX 0F38, a read)
        assert_eq!(at(&[0xF0, 0x0F, 0xC1, 0x07]), w(0x2000));
        assert_eq!(at(&[0xC4, 0xE2, 0x75, 0xB8, 0x46, 0x20]), r(0x30));
        // vextractf128 [rax], ymm0, 1 (VEX 0F3A)
        assert_eq!(at(&[0xC4, 0xE3, 0x7D, 0x19, 0x00, 0x01]), w(0x1000));
        // a base-less SIB: mov eax, [rcx*8+0x100]
        assert_eq!(at(&[0x8B, 0x04, 0xCD, 0x00, 0x01, 0x00, 0x00]), r(24 + 0x100));
        // stosd, lodsd
        assert_eq!(at(&[0xAB]), w(0x2000));
        assert_eq!(at(&[0xAD]), r(0x10));
    }

    /// Where no address can be computed, the kind still comes back; where the instruction is
    /// not a memory access known here, nothing does.
    #[test]
    fn what_cannot_be_decoded_is_not_guessed() {
        // mov eax, [rip+0x10]: the kind, no address
        assert_eq!(at(&[0x8B, 0x05, 0x10, 0x00, 0x00, 0x00]), Some(Access { write: false, addr: None }));
        // mov fs:[rax], ecx: relative to a segment base
        assert_eq!(at(&[0x64, 0x89, 0x08]), Some(Access { write: true, addr: None }));
        // vgatherdps (VSIB): a vector index
        assert_eq!(at(&[0xC4, 0xE2, 0x75, 0x92, 0x04, 0x88]).map(|a| a.addr), Some(None));
        // register operands, an x87 instruction, truncated bytes
        assert_eq!(at(&[0x89, 0xC8]), None);
        assert_eq!(at(&[0xD9, 0x00]), None);
        assert_eq!(at(&[0xC7, 0x04]), None);
        assert_eq!(at(&[0x66; 20]), None);
    }

    #[test]
    fn canonical_addresses() {
        assert!(canonical(0x7fff_ffff_f000) && canonical(0xffff_8000_0000_0000) && canonical(0));
        assert!(!canonical(0x8000_0000_0000) && !canonical(0x7fff_0000_0000_0000));
    }
}
