//! The engine's hooks: interrupts, unmapped memory, the protection table in the virtual TLB,
//! the instruction budget, x86 system calls, the alignment checks, and the exact memory hooks of
//! a confirmation run.

use super::*;

impl UnicornBackend {
    /// Interrupts, unmapped memory, the protection table, the instruction budget, x86 syscalls.
    pub(super) fn add_hooks(
        uc: &mut Unicorn<'static, ()>,
        arch: Arch,
        state: &Rc<RefCell<HookState>>,
        zbb: &Rc<Cell<bool>>,
        driver: std::ops::Range<u64>,
        limits: &Limits,
    ) -> Result<(), BackendError> {
        let s = Rc::clone(state);
        let z = Rc::clone(zbb);
        let mut emulator = zbb::ZbbEmulator::default();
        uc.add_intr_hook(move |uc, intno| {
            // A Zbb instruction is executed here and the guest goes on at the next instruction;
            // anything else stops the run.
            let mut st = s.borrow_mut();
            // Whatever block runs next was not entered through a patch.
            st.zbb.reset_run();
            if z.get() && intno == RISCV_ILLEGAL_INSTRUCTION {
                if let Some((at, insn)) = emulator.emulate(uc) {
                    st.zbb.trapped(at, insn);
                    return;
                }
            }
            st.seen.intno = Some(intno);
            let _ = uc.emu_stop();
        })
        .map_err(uc_err("interrupt hook"))?;
        // Everywhere but the arena's RAM, where nothing is unmapped and the TLB hook decides
        // (below): QEMU lets a store make a page's TLB entry fast again (`notdirty_write`,
        // `tlb_set_dirty`) only where no memory hook is installed, and kernels and the driver
        // store to the arena (the stack, outputs) all the time.
        let arena = state.borrow().arena_pages.clone();
        for (from, to) in [(0, arena.start.saturating_sub(1)), (arena.end, u64::MAX)] {
            let s = Rc::clone(state);
            uc.add_mem_hook(HookType::MEM_INVALID, from, to, move |_, ty, addr, _, _| {
                let access = match ty {
                    MemType::WRITE_UNMAPPED | MemType::WRITE_PROT => Access::Write,
                    MemType::FETCH_UNMAPPED | MemType::FETCH_PROT => Access::Fetch,
                    _ => Access::Read,
                };
                s.borrow_mut().seen.mem = Some((access, addr));
                false
            })
            .map_err(uc_err("memory hook"))?;
        }
        // The protection table through Unicorn's virtual TLB: the fill hook runs once per page
        // on a TLB miss (not per access), so guarded runs keep native speed. A guard page gets no
        // entry (the access faults as unmapped, caught by the hook above); a read-only page gets
        // an entry without write permission (a write faults as WRITE_PROT). A per-access memory
        // hook made x86_64 runs about 10x slower: Unicorn re-derives the pc from the whole
        // translation block before every hooked access (cpu_restore_state in cputlb.c).
        uc.ctl_set_tlb_type(TlbType::VIRTUAL).map_err(uc_err("virtual TLB"))?;
        // The engine's own page size (QEMU's AArch64 target uses 1 KiB pages), not the guest's.
        let uc_page = u64::from(uc.ctl_get_page_size().map_err(uc_err("page size"))?);
        let s = Rc::clone(state);
        uc.add_tlb_hook(1, 0, move |_, vaddr, ty| {
            let page = vaddr & !(uc_page - 1);
            let mut st = s.borrow_mut();
            if page >= ALIAS_OFFSET {
                // The engine's own pages above the image (the arena's MMIO alias, the patched
                // code copies) are no guest memory: the virtual TLB maps addresses one to one,
                // so a kernel reached them at their physical addresses (and the arena through
                // its alias, past guards and read-only rights), where qemu and native fault.
                let access = match ty {
                    MemType::WRITE => Access::Write,
                    MemType::FETCH => Access::Fetch,
                    _ => Access::Read,
                };
                st.seen.mem.get_or_insert((access, vaddr));
                return None;
            }
            let in_arena = st.arena_pages.contains(&page);
            if matches!(ty, MemType::FETCH) && in_arena {
                if !st.arena_exec {
                    // What the arena's mapping would refuse (FETCH_PROT), refused here, so that
                    // its entries can go without execute rights (see `arena_entry`).
                    st.seen.mem.get_or_insert((Access::Fetch, vaddr));
                    return None;
                }
                st.arena_fetched = true;
            }
            let i = st.prots.partition_point(|p| p.addr + p.len <= page);
            let prot = st.prots.get(i).filter(|p| p.contains(page)).map(|p| p.prot);
            let write = matches!(ty, MemType::WRITE);
            if st.open_page == Some(page) {
                let read_only = !write && prot.is_some_and(|p| p != 0 && p & PROT_WRITE == 0);
                return Some(TlbEntry { paddr: page, perms: if read_only { Prot::READ } else { Prot::ALL } });
            }
            // Refused fills surface as a guest page fault, not as Unicorn's unmapped-memory
            // hook, so the access is recorded here, with its exact address.
            if prot == Some(0) || (write && prot.is_some_and(|p| p & PROT_WRITE == 0)) {
                let access = if write {
                    Access::Write
                } else if matches!(ty, MemType::FETCH) {
                    Access::Fetch
                } else {
                    Access::Read
                };
                st.seen.mem.get_or_insert((access, vaddr));
                st.refused.get_or_insert(page);
                return None;
            }
            let read_only = prot.is_some_and(|p| p & PROT_WRITE == 0);
            if st.through_alias(page, uc_page) {
                // Every access near a buffer's edge goes through the MMIO alias (map_alias).
                let perms = if read_only { Prot::READ } else { Prot::READ | Prot::WRITE };
                return Some(TlbEntry { paddr: page + ALIAS_OFFSET, perms });
            }
            let mut perms = if read_only { Prot::READ | Prot::EXEC } else { Prot::ALL };
            if in_arena && !st.arena_exec {
                // QEMU keeps every store to a page whose TLB entry may execute on its slow path
                // (`notdirty_write` never clears TLB_NOTDIRTY there).
                perms = Prot(perms.0 & !Prot::EXEC.0);
            }
            if st.zbb.has_page(page) {
                // Fetches see the patched copy, loads and stores the real words; QEMU's victim
                // TLB keeps both entries, so a page that is read and run does not refill often.
                return Some(if matches!(ty, MemType::FETCH) {
                    TlbEntry { paddr: page + CODE_ALIAS_OFFSET, perms: Prot::EXEC }
                } else {
                    TlbEntry { paddr: page, perms: if read_only { Prot::READ } else { Prot::READ | Prot::WRITE } }
                });
            }
            Some(TlbEntry { paddr: page, perms })
        })
        .map_err(uc_err("TLB fill hook"))?;
        let s = Rc::clone(state);
        state.borrow_mut().budget = limits.call_instructions;
        // `u64::MAX` means no budget at all: no block hook, so timed runs (`lab bench`) see the
        // engine's own speed.
        let hook = limits.call_instructions != u64::MAX;
        hook.then(|| {
            uc.add_block_hook(1, 0, move |uc, addr, size| {
                let mut st = s.borrow_mut();
                st.zbb.enter(uc, addr, size);
                let budget = st.budget;
                // A whole batch may run this many blocks (driver included), so that even a kernel
                // that scribbles over the call table cannot keep the engine running forever
                // without the wall-clock timer (which costs Unicorn a thread waking every 2 us,
                // uc.c `_timeout_fn`).
                let batch_blocks = budget.saturating_mul(64);
                st.batch_blocks += 1;
                if st.batch_blocks.is_multiple_of(DEADLINE_STRIDE)
                    && st.seen.hang.is_none()
                    && st.deadline.is_some_and(|d| std::time::Instant::now() >= d)
                {
                    st.seen.hang = Some(addr);
                    let _ = uc.emu_stop();
                }
                if st.batch_blocks > batch_blocks && st.seen.budget.is_none() {
                    st.seen.budget = Some(addr);
                    let _ = uc.emu_stop();
                }
                if driver.contains(&addr) {
                    st.executed = 0; // between calls: the next kernel call starts a fresh count
                    return;
                }
                let n = u64::from(st.blocks.get(uc, addr, size));
                st.executed += n;
                if st.executed > budget && st.seen.budget.is_none() {
                    st.seen.budget = Some(addr);
                    let _ = uc.emu_stop();
                }
            })
        })
        .transpose()
        .map_err(uc_err("block hook"))?;
        for &insn in arch.spec().unicorn.syscall_hooks {
            let s = Rc::clone(state);
            uc.add_insn_sys_hook(insn, 1, 0, move |uc| {
                s.borrow_mut().seen.syscall = Some(uc.pc_read().unwrap_or(0));
                let _ = uc.emu_stop();
            })
            .map_err(uc_err("syscall hook"))?;
        }
        Ok(())
    }

    /// One code hook per instruction of the kernels' code that an alignment rule checks
    /// ([`align::hook_sites`]: sp-based accesses on AArch64, calls on x86_64 and riscv64, and
    /// aligned-only instructions): QEMU checks neither sp alignment nor (in Unicorn's x86 engine)
    /// the operands of aligned-only SSE moves. Only those instructions pay a callback, so runs
    /// of kernels without them cost nothing. A broken rule stops the run ([`AlignStop`]).
    pub(super) fn add_align_hooks(
        uc: &mut Unicorn<'static, ()>,
        image: &Image,
        state: &Rc<RefCell<HookState>>,
    ) -> Result<(), BackendError> {
        let sites = align::hook_sites(image).map_err(|e| BackendError::Unicorn(format!("alignment hooks: {e}")))?;
        let spec = image.arch.spec();
        let (sp_reg, rules) = (spec.unicorn.sp, &spec.align);
        for site in sites {
            let s = Rc::clone(state);
            let pc = site.insn.addr;
            uc.add_code_hook(pc, pc, move |uc, addr, _| {
                let stop = match site.check {
                    SiteCheck::Sp => uc
                        .reg_read(sp_reg)
                        .ok()
                        .filter(|sp| !sp.is_multiple_of(align::SP_ALIGN))
                        .map(|sp| AlignStop::Sp { pc: addr, sp }),
                    SiteCheck::Operand(_) => {
                        let mut read = |name: &str| {
                            let id = rules.unicorn_regs.iter().find(|(n, _)| *n == name)?.1;
                            uc.reg_read(id).ok()
                        };
                        align::misaligned_operand(rules, &site.insn, &mut read)
                            .map(|(addr_, need)| AlignStop::Operand { pc: addr, addr: addr_, need })
                    }
                };
                if let Some(stop) = stop {
                    s.borrow_mut().seen.align.get_or_insert(stop);
                    let _ = uc.emu_stop();
                }
            })
            .map_err(uc_err("alignment hook"))?;
        }
        Ok(())
    }

    /// Stops a call at the first kernel instruction Unicorn cannot execute
    /// ([`crate::isa::unicorn_stops`] of `image` with the declared `extensions`) instead of
    /// running it wrongly or trapping: one code hook per run of consecutive such instructions
    /// (any instruction inside a run is a stop, so the hook fires where a call enters it), so a
    /// vector loop costs one hook, not one per instruction. Calls that never reach one run as
    /// before, at full speed. The fault is [`FaultKind::NotRunPast`]. Also jumps over the
    /// driver's vector entry state ([`crate::isa::VECTOR_ENTRY`]), which Unicorn cannot set.
    ///
    /// # Errors
    /// The disassembly fails, or Unicorn refuses a hook.
    pub fn stop_at_unsupported(&mut self, image: &Image, extensions: &[&str]) -> Result<(), BackendError> {
        let stops = crate::isa::unicorn_stops(image, extensions)
            .map_err(|e| BackendError::Unicorn(format!("unsupported-instruction scan: {e}")))?;
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for s in &stops {
            match runs.last_mut() {
                Some((_, end)) if *end == s.addr => *end = s.addr + s.len,
                _ => runs.push((s.addr, s.addr + s.len)),
            }
        }
        for (from, to) in runs {
            let st = Rc::clone(&self.state);
            self.uc
                .add_code_hook(from, to - 1, move |uc, addr, _| {
                    st.borrow_mut().seen.unsupported.get_or_insert(addr);
                    let _ = uc.emu_stop();
                })
                .map_err(uc_err("unsupported-instruction hook"))?;
        }
        self.stops = stops;
        self.skip_vector_entry(image)
    }

    /// Jumps over the driver's vector entry state ([`crate::isa::VECTOR_ENTRY`]) of an image
    /// linked for a vector extension, which Unicorn cannot set (it has no vector unit): the
    /// driver then runs scalar kernel code as in a process.
    ///
    /// # Errors
    /// Unicorn refuses the hook.
    pub fn skip_vector_entry(&mut self, image: &Image) -> Result<(), BackendError> {
        let (begin, end) = crate::isa::VECTOR_ENTRY;
        if let (Some(b), Some(e)) = (image.symbol(begin), image.symbol(end)) {
            let to = e.addr;
            self.uc
                .add_code_hook(b.addr, b.addr, move |uc, _, _| {
                    let _ = uc.set_pc(to);
                })
                .map_err(uc_err("vector-entry hook"))?;
        }
        Ok(())
    }

    /// Memory hooks on the alias of exact page `page` that stop at the first access outside the
    /// page's allowed bytes and record it with its pc; an access inside explains the noted
    /// fragments it overlaps ([`HookState::to_explain`]).
    ///
    /// Unicorn runs a memory hook with the access as the guest made it (before the MMIO path
    /// splits an unaligned one) and only for accesses that start inside the hook's range, but
    /// before each it re-derives the pc from the translation block (`cpu_restore_state`, which
    /// costs about as much as the block's instructions). So the hooks cover only where an access
    /// outside the buffer, or explain a fragment that did, can start: up to [`EXPLAIN_REACH`]
    /// bytes past the buffer's start, and from as far before its end to the page's end;
    /// accesses well inside the buffer run unhooked.
    pub(super) fn exact_hook(
        &mut self,
        page: u64,
        hooks: &mut Vec<unicorn_engine::UcHookId>,
    ) -> Result<(), BackendError> {
        let Some(&(lo, hi)) = self.state.borrow().exact.get(&page) else { return Ok(()) };
        let end = page + PAGE;
        // `(from, to, offset)`: guest bytes `[from, to)` hooked at `offset` above them.
        let mut zones = vec![
            (page, (lo + EXPLAIN_REACH).clamp(page, end), ALIAS_OFFSET),
            (hi.saturating_sub(EXPLAIN_REACH).clamp(page, end), end, ALIAS_OFFSET),
        ];
        // A load that explains a fragment past an end just after a page boundary may start on the
        // page before (QEMU splits it there): hooked at both of that page's addresses, which
        // may be plain or the alias.
        let before = hi.saturating_sub(EXPLAIN_REACH).max(lo).max(page.saturating_sub(PAGE));
        if (page + 1..=end).contains(&hi) && before < page {
            zones.extend([(before, page, 0), (before, page, ALIAS_OFFSET)]);
        }
        for (from, to, offset) in zones.into_iter().filter(|&(from, to, _)| from < to) {
            let s = Rc::clone(&self.state);
            let hook = self
                .uc
                .add_mem_hook(
                    HookType::MEM_READ | HookType::MEM_WRITE,
                    from + offset,
                    to + offset - 1,
                    move |uc, ty, addr, size, _| {
                        let access = if ty == MemType::WRITE { Access::Write } else { Access::Read };
                        let addr = addr.wrapping_sub(offset);
                        let mut st = s.borrow_mut();
                        if st.seen.pinned.is_some() {
                            return true;
                        }
                        let partial = access == Access::Read && st.partial_load_ok(page, addr, size as u64);
                        if partial {
                            if let (Some(call), Ok(pc)) = (st.confirming, uc.pc_read()) {
                                let call = call as usize;
                                let fail = st.partial_policy == crate::backend::PartialLoads::Fail;
                                let size = size as u64;
                                st.partial.push(crate::backend::PartialLoad { call, pc, addr, size, fail });
                            }
                        }
                        if let Some(first) = st.outside(page, addr, size as u64).filter(|_| !partial) {
                            st.seen.mem = Some((access, first));
                            st.seen.pinned = uc.pc_read().ok();
                            st.seen.exact = Some((size, addr));
                            let _ = uc.emu_stop();
                        } else {
                            let end = addr + size as u64;
                            st.to_explain.retain(|&(lo, hi)| !(addr < hi && lo < end));
                        }
                        true
                    },
                )
                .map_err(uc_err("exact-page hook"))?;
            hooks.push(hook);
        }
        Ok(())
    }
}
