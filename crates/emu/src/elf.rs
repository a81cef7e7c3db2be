//! What a compiled kernel object may reach, checked before it is loaded (a constructor would
//! run at `dlopen`, and the loader resolves every symbol then).
//!
//! The Metal check keeps a kernel from naming anything outside Metal; this is the second line:
//! the object's ELF dynamic section, symbol table and relocations are read (a focused reader of
//! 64-bit little-endian x86-64 shared objects, every offset bounds-checked), and the object is
//! refused when it
//! - refers to a symbol outside [`ALLOWED`] (libm's float functions and `memcpy`, `memmove`,
//!   `memset`; in sanitize mode also the sanitizers' entry points and `dlsym`, which the shim's
//!   report wrappers call), by an undefined symbol or a relocation;
//! - has anything the loader runs: `DT_INIT`, `DT_FINI`, `DT_INIT_ARRAY`, `DT_FINI_ARRAY`,
//!   `DT_PREINIT_ARRAY` (in sanitize mode, and in the threadgroup-memory check's objects, only
//!   GCC's sanitizer module constructor and destructor, `_sub_I_00099_*` and `_sub_D_00099_*`:
//!   the check's calls the shim's own `__tsan_init`, which does nothing), an IFUNC resolver, or
//!   a dynamic tag this reader does not know;
//! - needs a library other than libm and libc (the sanitizer runtimes in sanitize mode), or an
//!   executable stack.
//!
//! The object is linked without the C runtime's start files (`-nostdlib`, so the toolchain
//! adds no constructor of its own) and with `-z defs` (every symbol resolved at link time), so
//! a kernel the compiler accepted fails here only when it reaches for the host.

use crate::compile::Build;

/// What an emulated kernel object may refer to: the math the shim's builtins become calls to
/// (libm), the copies g++ emits for aggregates, and their fortified and stack-protector
/// variants (a distribution's g++ may enable `_FORTIFY_SOURCE` and `-fstack-protector`: they
/// abort, nothing more).
pub(crate) const ALLOWED: [&str; 47] = [
    "acosf", "acoshf", "asinf", "asinhf", "atan2f", "atanf", "atanhf", "ceilf", "copysignf", "cos", "cosf", "coshf",
    "exp2f", "expf", "fabsf", "floorf", "fmaf", "fmaxf", "fminf", "fmodf", "frexpf", "ldexpf", "log10f", "log2f",
    "logf", "nextafterf", "powf", "rintf", "roundf", "sin", "sincos", "sincosf", "sinf", "sinhf", "sqrtf", "tan",
    "tanf", "tanhf", "truncf", "memcpy", "memmove", "memset", "__memcpy_chk", "__memmove_chk", "__memset_chk",
    "__stack_chk_fail", "__stack_chk_fail_local",
];

/// Libraries an object may need (by `DT_NEEDED` name).
const LIBRARIES: [&str; 2] = ["libm.so.6", "libc.so.6"];
/// And in sanitize mode (prefixes: the runtimes' sonames carry a version).
const SANITIZER_LIBRARIES: [&str; 2] = ["libasan.so.", "libubsan.so."];

/// Whether a sanitized object may refer to `name`: the sanitizers' instrumentation entry points
/// (reports, stack and global registration), and `dlsym`, with which the shim's report
/// wrappers find the real handlers.
fn sanitizer_symbol(name: &str) -> bool {
    name.starts_with("__asan_") || name.starts_with("__ubsan_handle_") || name == "dlsym"
}

/// The sanitizer's module constructor and destructor (GCC names them so; they register the
/// object's globals with ASan).
fn sanitizer_constructor(name: &str) -> bool {
    ["_sub_I_00099_", "_sub_D_00099_"]
        .iter()
        .any(|p| name.strip_prefix(p).is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())))
}

// ELF constants (System V ABI, x86-64 psABI).
const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const PT_GNU_STACK: u32 = 0x6474_e551;
const PF_X: u32 = 1;
const SHT_SYMTAB: u32 = 2;
const SHT_INIT_ARRAY: u32 = 14;
const SHT_FINI_ARRAY: u32 = 15;
const SHT_PREINIT_ARRAY: u32 = 16;
const STT_GNU_IFUNC: u8 = 10;
const DT_NULL: u64 = 0;
const DT_NEEDED: u64 = 1;
const DT_PLTRELSZ: u64 = 2;
const DT_HASH: u64 = 4;
const DT_STRTAB: u64 = 5;
const DT_SYMTAB: u64 = 6;
const DT_RELA: u64 = 7;
const DT_RELASZ: u64 = 8;
const DT_STRSZ: u64 = 10;
const DT_SYMENT: u64 = 11;
const DT_INIT: u64 = 12;
const DT_FINI: u64 = 13;
const DT_PLTREL: u64 = 20;
const DT_JMPREL: u64 = 23;
const DT_INIT_ARRAY: u64 = 25;
const DT_FINI_ARRAY: u64 = 26;
const DT_INIT_ARRAYSZ: u64 = 27;
const DT_FINI_ARRAYSZ: u64 = 28;
const DT_PREINIT_ARRAY: u64 = 32;
const DT_PREINIT_ARRAYSZ: u64 = 33;
const DT_GNU_HASH: u64 = 0x6fff_fef5;
/// Tags that describe the object and nothing the loader runs or loads beyond `DT_NEEDED`:
/// PLTGOT, RELAENT, SONAME, SYMBOLIC, BIND_NOW, FLAGS, RELR and its size and entry, the
/// symbol versions, RELACOUNT, FLAGS_1.
const DESCRIPTIVE_TAGS: [u64; 18] = [
    3, 9, 14, 16, 24, 30, 35, 36, 37, 0x6fff_fff0, 0x6fff_fff9, 0x6fff_fffb, 0x6fff_fffc, 0x6fff_fffd, 0x6fff_fffe,
    0x6fff_ffff, DT_PLTREL, 21,
];
const R_X86_64_NONE: u32 = 0;
const R_X86_64_64: u32 = 1;
const R_X86_64_GLOB_DAT: u32 = 6;
const R_X86_64_JUMP_SLOT: u32 = 7;
const R_X86_64_RELATIVE: u32 = 8;

/// Reasons `bytes` (a kernel object built with or without the sanitizers) must not be loaded;
/// empty when it may.
pub(crate) fn refusals(bytes: &[u8], build: Build) -> Vec<String> {
    match Elf::parse(bytes).and_then(|elf| elf.refusals(build.sanitizer_runtime(), build.instrumented())) {
        Ok(r) => r,
        Err(e) => vec![format!("it is not an object this reader can vouch for ({e})")],
    }
}

struct Elf<'a> {
    b: &'a [u8],
    loads: Vec<(u64, u64, u64)>,
    dynamic: Vec<(u64, u64)>,
    exec_stack: bool,
    sections: Vec<Section>,
}

#[derive(Clone, Copy)]
struct Section {
    kind: u32,
    offset: u64,
    size: u64,
    link: u32,
    entsize: u64,
}

struct Symbol {
    name: String,
    kind: u8,
    defined: bool,
}

fn get(b: &[u8], off: u64, len: u64) -> Result<&[u8], String> {
    let end = off.checked_add(len).ok_or("an offset overflows")?;
    b.get(off as usize..end as usize).ok_or_else(|| format!("bytes {off}..{end} are past the end of the file"))
}
fn u16_at(b: &[u8], off: u64) -> Result<u16, String> {
    Ok(u16::from_le_bytes(get(b, off, 2)?.try_into().unwrap()))
}
fn u32_at(b: &[u8], off: u64) -> Result<u32, String> {
    Ok(u32::from_le_bytes(get(b, off, 4)?.try_into().unwrap()))
}
fn u64_at(b: &[u8], off: u64) -> Result<u64, String> {
    Ok(u64::from_le_bytes(get(b, off, 8)?.try_into().unwrap()))
}

impl<'a> Elf<'a> {
    fn parse(b: &'a [u8]) -> Result<Elf<'a>, String> {
        if get(b, 0, 4)? != b"\x7fELF" || get(b, 4, 2)? != [2, 1] {
            return Err("not a 64-bit little-endian ELF file".into());
        }
        if u16_at(b, 16)? != 3 || u16_at(b, 18)? != 62 {
            return Err("not an x86-64 shared object".into());
        }
        let (phoff, phentsize, phnum) = (u64_at(b, 32)?, u16_at(b, 54)? as u64, u16_at(b, 56)? as u64);
        let (shoff, shentsize, shnum) = (u64_at(b, 40)?, u16_at(b, 58)? as u64, u16_at(b, 60)? as u64);
        if phentsize < 56 || (shnum > 0 && shentsize < 64) {
            return Err("unexpected header sizes".into());
        }
        let mut elf = Elf { b, loads: Vec::new(), dynamic: Vec::new(), exec_stack: false, sections: Vec::new() };
        let mut dynamic = None;
        for i in 0..phnum {
            let p = phoff + i * phentsize;
            let (kind, flags) = (u32_at(b, p)?, u32_at(b, p + 4)?);
            let (offset, vaddr, filesz) = (u64_at(b, p + 8)?, u64_at(b, p + 16)?, u64_at(b, p + 32)?);
            match kind {
                PT_LOAD => elf.loads.push((vaddr, filesz, offset)),
                PT_DYNAMIC => dynamic = Some((offset, filesz)),
                PT_GNU_STACK => elf.exec_stack = flags & PF_X != 0,
                _ => {}
            }
        }
        let (off, size) = dynamic.ok_or("no dynamic section")?;
        for i in 0..size / 16 {
            let tag = u64_at(b, off + i * 16)?;
            if tag == DT_NULL {
                break;
            }
            elf.dynamic.push((tag, u64_at(b, off + i * 16 + 8)?));
        }
        for i in 0..shnum {
            let s = shoff + i * shentsize;
            elf.sections.push(Section {
                kind: u32_at(b, s + 4)?,
                offset: u64_at(b, s + 24)?,
                size: u64_at(b, s + 32)?,
                link: u32_at(b, s + 40)?,
                entsize: u64_at(b, s + 56)?,
            });
        }
        Ok(elf)
    }

    fn tag(&self, tag: u64) -> Option<u64> {
        self.dynamic.iter().find(|(t, _)| *t == tag).map(|(_, v)| *v)
    }

    /// The file offset of the address `a` (in a loaded segment's file image).
    fn offset(&self, a: u64) -> Result<u64, String> {
        self.loads
            .iter()
            .find(|(vaddr, filesz, _)| a >= *vaddr && a - vaddr < *filesz)
            .map(|(vaddr, _, off)| a - vaddr + off)
            .ok_or_else(|| format!("address {a:#x} is in no loaded segment"))
    }

    fn dyn_str(&self, idx: u64) -> Result<String, String> {
        let (strtab, strsz) = (self.tag(DT_STRTAB).ok_or("no DT_STRTAB")?, self.tag(DT_STRSZ).ok_or("no DT_STRSZ")?);
        if idx >= strsz {
            return Err(format!("a name at {idx} is past the string table"));
        }
        let s = get(self.b, self.offset(strtab)? + idx, strsz - idx)?;
        let end = s.iter().position(|&c| c == 0).ok_or("an unterminated name")?;
        Ok(String::from_utf8_lossy(&s[..end]).into_owned())
    }

    /// How many dynamic symbols there are: from `DT_HASH`'s chain count, else by walking
    /// `DT_GNU_HASH` to its last chain.
    fn dyn_symbol_count(&self) -> Result<u64, String> {
        if let Some(h) = self.tag(DT_HASH) {
            return Ok(u32_at(self.b, self.offset(h)? + 4)? as u64);
        }
        let h = self.offset(self.tag(DT_GNU_HASH).ok_or("no symbol hash table")?)?;
        let (nbuckets, symoffset, bloom) = (u32_at(self.b, h)? as u64, u32_at(self.b, h + 4)? as u64, u32_at(self.b, h + 8)? as u64);
        let buckets = h + 16 + bloom * 8;
        let chains = buckets + nbuckets * 4;
        let mut last = 0u64;
        for i in 0..nbuckets {
            last = last.max(u32_at(self.b, buckets + i * 4)? as u64);
        }
        if last < symoffset {
            return Ok(symoffset);
        }
        // every step reads four more bytes of the file: the walk ends within it
        while u32_at(self.b, chains + (last - symoffset) * 4)? & 1 == 0 {
            last += 1;
        }
        Ok(last + 1)
    }

    fn dyn_symbols(&self) -> Result<Vec<Symbol>, String> {
        let symtab = self.offset(self.tag(DT_SYMTAB).ok_or("no DT_SYMTAB")?)?;
        let ent = self.tag(DT_SYMENT).unwrap_or(24);
        if ent < 24 {
            return Err("unexpected symbol size".into());
        }
        (0..self.dyn_symbol_count()?)
            .map(|i| {
                let s = symtab + i * ent;
                Ok(Symbol {
                    name: self.dyn_str(u32_at(self.b, s)? as u64)?,
                    kind: get(self.b, s + 4, 1)?[0] & 0xf,
                    defined: u16_at(self.b, s + 6)? != 0,
                })
            })
            .collect()
    }

    /// Every `(offset, type, symbol index, addend)` of the `DT_RELA` and `DT_JMPREL` tables.
    fn relocations(&self) -> Result<Vec<(u64, u32, u64, u64)>, String> {
        let mut tables = Vec::new();
        if let Some(a) = self.tag(DT_RELA) {
            tables.push((a, self.tag(DT_RELASZ).unwrap_or(0)));
        }
        if let Some(a) = self.tag(DT_JMPREL) {
            if self.tag(DT_PLTREL) != Some(DT_RELA) {
                return Err("PLT relocations that are not RELA".into());
            }
            tables.push((a, self.tag(DT_PLTRELSZ).unwrap_or(0)));
        }
        let mut out = Vec::new();
        for (addr, size) in tables {
            let off = self.offset(addr)?;
            get(self.b, off, size)?;
            for i in 0..size / 24 {
                let r = off + i * 24;
                let info = u64_at(self.b, r + 8)?;
                out.push((u64_at(self.b, r)?, info as u32, info >> 32, u64_at(self.b, r + 16)?));
            }
        }
        Ok(out)
    }

    /// The name `.symtab` gives the function at `addr` (what an init array points to).
    fn function_at(&self, addr: u64) -> Option<String> {
        let symtab = self.sections.iter().find(|s| s.kind == SHT_SYMTAB && s.entsize >= 24)?;
        let strtab = self.sections.get(symtab.link as usize)?;
        let names = get(self.b, strtab.offset, strtab.size).ok()?;
        (0..symtab.size / symtab.entsize).find_map(|i| {
            let s = symtab.offset + i * symtab.entsize;
            let function = get(self.b, s + 4, 1).ok()?[0] & 0xf == 2;
            if !function || u64_at(self.b, s + 8).ok()? != addr {
                return None;
            }
            let name = names.get(u32_at(self.b, s).ok()? as usize..)?;
            let end = name.iter().position(|&c| c == 0)?;
            Some(String::from_utf8_lossy(&name[..end]).into_owned())
        })
    }

    /// The functions an init or fini array at `addr` of `size` bytes calls: each entry is the
    /// addend of its relative relocation, or the address stored there.
    fn array_functions(&self, addr: u64, size: u64, relocs: &[(u64, u32, u64, u64)]) -> Result<Vec<String>, String> {
        (0..size / 8)
            .map(|i| {
                let at = addr + i * 8;
                let target = match relocs.iter().find(|r| r.0 == at && r.1 == R_X86_64_RELATIVE) {
                    Some(r) => r.3,
                    None => u64_at(self.b, self.offset(at)?)?,
                };
                Ok(self.function_at(target).unwrap_or_else(|| format!("the function at {target:#x}")))
            })
            .collect()
    }

    /// `sanitize`: the sanitizer runtimes are linked; `instrumented`: GCC's sanitizer module
    /// constructor is allowed (the sanitizers', or the threadgroup check's, whose
    /// `__tsan_init` is the shim's own and does nothing).
    fn refusals(&self, sanitize: bool, instrumented: bool) -> Result<Vec<String>, String> {
        let mut out = Vec::new();
        let symbols = self.dyn_symbols()?;
        let relocs = self.relocations()?;
        let allowed = |name: &str| ALLOWED.contains(&name) || (sanitize && sanitizer_symbol(name));
        let mut foreign: Vec<&str> = Vec::new();
        for s in symbols.iter().filter(|s| !s.defined && !s.name.is_empty() && !allowed(&s.name)) {
            foreign.push(&s.name);
        }
        for &(_, kind, sym, _) in &relocs {
            match kind {
                R_X86_64_NONE | R_X86_64_RELATIVE if sym == 0 => {}
                R_X86_64_64 | R_X86_64_GLOB_DAT | R_X86_64_JUMP_SLOT => {
                    let s = symbols.get(sym as usize).ok_or("a relocation names no symbol")?;
                    // a defined symbol is bound by the loader too (another library's definition
                    // of the name would be used): only the allowed names are looked up
                    if !s.name.is_empty() && !allowed(&s.name) && !foreign.contains(&s.name.as_str()) {
                        foreign.push(&s.name);
                    }
                }
                other => out.push(format!("it has a relocation of type {other}, which the loader would run or this reader does not know")),
            }
        }
        if !foreign.is_empty() {
            foreign.sort_unstable();
            let names: Vec<String> = foreign.iter().map(|n| format!("`{n}`")).collect();
            out.push(format!(
                "it refers to {}, outside the emulator's runtime (a kernel may call libm's float functions and memcpy, memmove, memset)",
                names.join(", ")
            ));
        }
        for s in symbols.iter().filter(|s| s.defined && s.kind == STT_GNU_IFUNC) {
            out.push(format!("it has an IFUNC symbol `{}`, whose resolver the loader would run", s.name));
        }
        for &(tag, val) in &self.dynamic {
            match tag {
                DT_NEEDED => {
                    let lib = self.dyn_str(val)?;
                    let ok = LIBRARIES.contains(&lib.as_str())
                        || (sanitize && SANITIZER_LIBRARIES.iter().any(|p| lib.starts_with(p)));
                    if !ok {
                        out.push(format!("it needs the library `{lib}`, which the loader would load"));
                    }
                }
                DT_INIT | DT_FINI => out.push(format!(
                    "it has a {} function (DT_{}), which the loader would run",
                    if tag == DT_INIT { "constructor" } else { "destructor" },
                    if tag == DT_INIT { "INIT" } else { "FINI" }
                )),
                DT_INIT_ARRAY | DT_FINI_ARRAY | DT_PREINIT_ARRAY => {
                    let size_tag = match tag {
                        DT_INIT_ARRAY => DT_INIT_ARRAYSZ,
                        DT_FINI_ARRAY => DT_FINI_ARRAYSZ,
                        _ => DT_PREINIT_ARRAYSZ,
                    };
                    let size = self.tag(size_tag).unwrap_or(0);
                    for f in self.array_functions(val, size, &relocs)? {
                        if !(instrumented && sanitizer_constructor(&f)) {
                            let what = if tag == DT_FINI_ARRAY { "destructor" } else { "constructor" };
                            out.push(format!("it has a {what} (`{f}`), which the loader would run"));
                        }
                    }
                }
                DT_INIT_ARRAYSZ | DT_FINI_ARRAYSZ | DT_PREINIT_ARRAYSZ | DT_HASH | DT_GNU_HASH | DT_STRTAB | DT_SYMTAB
                | DT_RELA | DT_RELASZ | DT_STRSZ | DT_SYMENT | DT_JMPREL | DT_PLTRELSZ => {}
                t if DESCRIPTIVE_TAGS.contains(&t) => {}
                t => out.push(format!("it has the dynamic tag {t:#x}, which this reader does not know")),
            }
        }
        // Sections the loader does not read, but which only a constructor fills.
        if !instrumented
            && self.sections.iter().any(|s| matches!(s.kind, SHT_INIT_ARRAY | SHT_FINI_ARRAY | SHT_PREINIT_ARRAY) && s.size > 0)
            && !out.iter().any(|m| m.contains("constructor") || m.contains("destructor"))
        {
            out.push("it has an init or fini array section".into());
        }
        if self.exec_stack {
            out.push("it asks for an executable stack".into());
        }
        Ok(out)
    }
}
