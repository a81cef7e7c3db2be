//! The context switch between fibers (callee-saved registers and the stack pointer, no
//! system call) and the fiber stacks it switches between.

use std::cell::RefCell;
use std::ffi::c_void;
use std::ptr::null_mut;

use crate::EmuError;

std::arch::global_asm!(
    ".text",
    ".p2align 4",
    ".globl kgemu_rt_switch",
    ".hidden kgemu_rt_switch",
    "kgemu_rt_switch:",
    "push rbp",
    "push rbx",
    "push r12",
    "push r13",
    "push r14",
    "push r15",
    "mov [rdi], rsp",
    "mov rsp, rsi",
    ".globl kgemu_rt_resume",
    ".hidden kgemu_rt_resume",
    "kgemu_rt_resume:",
    "pop r15",
    "pop r14",
    "pop r13",
    "pop r12",
    "pop rbx",
    "pop rbp",
    // Not `ret`: the return-stack predictor expects the switching fiber's own call site
    // (a lane leaving at one collective), but the resumed fiber waits at another (the
    // collective before it), so every `ret` here mispredicted. An indirect jump is
    // predicted from the branch history, which knows which collective comes next
    // (DeltaNet at T = 64: 0.43 s to 0.30 s). Like the stack switch itself, it assumes no
    // shadow stack and no indirect-branch tracking, which Linux does not enable for a
    // process that does not ask for them.
    "pop rcx",
    "jmp rcx",
    ".p2align 4",
    ".globl kgemu_rt_trampoline",
    ".hidden kgemu_rt_trampoline",
    "kgemu_rt_trampoline:",
    "mov rdi, r12",
    "call rbx",
    "ud2",
);

unsafe extern "C" {
    /// Save callee-saved registers on the current stack, store the stack pointer in
    /// `*save`, switch to `to` and restore the registers saved there.
    pub(super) fn kgemu_rt_switch(save: *mut *mut u8, to: *mut u8);
    pub(super) fn kgemu_rt_resume();
    pub(super) fn kgemu_rt_trampoline();
}

/// A fiber stack: an anonymous mapping, its lowest `STACK_GUARD` bytes inaccessible.
pub(super) struct Stack {
    map: *mut u8,
    len: usize,
}

/// The range the fiber stack tops are staggered over (see `prepare`); every stack has
/// this much more than its usable size.
pub(super) const STACK_COLORS: usize = 64 * 1024;

/// `PROT_NONE` bytes below every fiber stack (kernels are built with
/// `-fstack-clash-protection`, so an overflowing frame touches the guard's first page).
pub(super) const STACK_GUARD: usize = 64 * 1024;

impl Stack {
    pub(super) fn new(size: usize) -> Result<Stack, EmuError> {
        let page = STACK_GUARD;
        let len = size + page;
        let map = unsafe {
            libc::mmap(
                null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(EmuError::Memory { what: format!("cannot map a {len}-byte fiber stack: {}", std::io::Error::last_os_error()) });
        }
        unsafe { libc::mprotect(map, page, libc::PROT_NONE) };
        Ok(Stack { map: map as *mut u8, len })
    }
    pub(super) fn lo(&self) -> *mut u8 {
        unsafe { self.map.add(STACK_GUARD) }
    }
    pub(super) fn size(&self) -> usize {
        self.len - STACK_GUARD
    }
    pub(super) fn top(&self) -> *mut u8 {
        unsafe { self.map.add(self.len) }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.map as *mut c_void, self.len) };
    }
}

thread_local! {
    /// This worker's fiber stacks and their usable size.
    pub(super) static STACKS: RefCell<(usize, Vec<Stack>)> = const { RefCell::new((0, Vec::new())) };
}
