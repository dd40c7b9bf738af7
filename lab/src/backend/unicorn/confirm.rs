//! Bounds confirmation: a batch's first run notes suspect fragments near buffer edges; each call that
//! made one runs again alone under memory hooks, which pin the access down or prove the fragment a
//! legal load, and a kernel that behaves differently when run again fails the call.

use super::*;

/// The detail of a fault the batch's run saw and the call's re-run did not repeat.
pub(super) const UNREPEATED: &str =
    "seen in the batch's run; the call's re-run under a memory hook made no access that explains \
     it: the kernel behaves differently when run again";

/// How a confirmation run of a suspect call ended ([`UnicornBackend::confirm`]).
pub(super) enum Confirm {
    /// A memory hook saw an access outside a buffer (in `seen`, with its pc).
    Pinned,
    /// The call returned without one, and its accesses explained every noted fragment.
    Completed,
    /// The call returned, but made no access that explains this fragment of the batch's run
    /// (`[lo, hi)`): it behaved differently when run again.
    Unrepeated((u64, u64)),
    /// The call stopped otherwise: how the engine stopped and the pc.
    Stopped(Result<(), uc_error>, u64),
}

impl UnicornBackend {
    /// The TLB hook only sees the page of a refused access. To name the exact address and
    /// instruction, run the faulting call again alone from the arena as the fault left it (the
    /// driver re-copies the call's inputs), with that page let through and a memory hook on it
    /// alone: the first access to it is the fault. Returns the pc of that access; `None` when
    /// the re-run made none, and then the access the batch's run saw stands, marked as not
    /// repeated ([`Seen::unrepeated`]).
    pub(super) fn pin_down(&mut self, page: u64) -> Result<Option<u64>, BackendError> {
        let current = self.header(protocol::header::CURRENT)?;
        let ncalls = self.header(protocol::header::NCALLS)?;
        // The refused access as the batch's run saw it (the re-run starts from fresh hooks).
        let first = self.state.borrow().seen.mem;
        self.set_header(protocol::header::START, current)?;
        // The call alone: one that does not repeat the access must not run the rest.
        self.set_header(protocol::header::NCALLS, current + 1)?;
        // On a read-only page only a write is the fault (the TLB hook keeps the page read-only
        // meanwhile, so the first write comes through the slow path and this hook).
        let writes_only = {
            let st = self.state.borrow();
            let i = st.prots.partition_point(|p| p.addr + p.len <= page);
            st.prots.get(i).is_some_and(|p| p.contains(page) && p.prot != 0)
        };
        // The page itself, and the last bytes before it (through the arena's alias if that page
        // is exact): an unaligned access may start there and cross into the page.
        let ranges = [(page, page + self.uc_page, 0), (page.saturating_sub(HOOK_REACH), page, 0)];
        let alias = (page.saturating_sub(HOOK_REACH) + ALIAS_OFFSET, page + ALIAS_OFFSET, ALIAS_OFFSET);
        let mut hooks = Vec::new();
        for (from, to, offset) in ranges.into_iter().chain([alias]).filter(|(from, to, _)| from < to) {
            let s = Rc::clone(&self.state);
            let hook = self
                .uc
                .add_mem_hook(HookType::MEM_READ | HookType::MEM_WRITE, from, to - 1, move |uc, ty, addr, size, _| {
                    let access = if ty == MemType::WRITE { Access::Write } else { Access::Read };
                    let addr = addr.wrapping_sub(offset);
                    let mut st = s.borrow_mut();
                    let reaches = addr.saturating_add(size as u64) > page;
                    if reaches && st.open_page.is_some() && (access == Access::Write || !writes_only) {
                        st.seen.mem = Some((access, addr.max(page)));
                        st.open_page = None;
                        st.seen.pinned = uc.pc_read().ok();
                        let _ = uc.emu_stop();
                    }
                    true
                })
                .map_err(uc_err("pin-down hook"));
            match hook {
                Ok(h) => hooks.push(h),
                Err(e) => {
                    for h in hooks {
                        let _ = self.uc.remove_hook(h);
                    }
                    return Err(e);
                }
            }
        }
        {
            let mut st = self.state.borrow_mut();
            st.open_page = Some(page);
            st.tlb_stale = true;
        }
        // Only the pc the hook saw counts: the pc the run stopped at is not the access's.
        let run = self.start();
        for h in hooks {
            let _ = self.uc.remove_hook(h);
        }
        let _ = run?;
        let mut st = self.state.borrow_mut();
        st.open_page = None;
        st.tlb_stale = true;
        // The page was let through: the guest may have written it.
        if page >= self.arena.addr {
            let opened = ((page - self.arena.addr) / PAGE) as usize;
            if let Some(d) = st.dirty.as_mut().and_then(|d| d.get_mut(opened)) {
                *d = Span::WHOLE;
            }
        }
        let pinned = st.seen.pinned.take();
        if pinned.is_none() {
            // The call did not make the access again: the batch's run saw it, and it stands.
            st.seen = Seen { mem: first, unrepeated: first.is_some(), ..Seen::default() };
        }
        drop(st);
        self.set_header(protocol::header::NCALLS, ncalls)?;
        Ok(pinned)
    }

    /// An MMIO access on exact page `page` touched bytes outside its buffer. Re-runs the call in
    /// flight alone ([`confirm_call`](Self::confirm_call)); when it completes, the batch goes on
    /// from the next call.
    pub(super) fn confirm(&mut self, fragment: Fragment) -> Result<Confirm, BackendError> {
        let current = self.header(protocol::header::CURRENT)?;
        let ncalls = self.header(protocol::header::NCALLS)?;
        let outcome = self.confirm_call(current, &[fragment.page], &[(fragment.lo, fragment.hi)]);
        self.set_header(protocol::header::NCALLS, ncalls)?;
        if matches!(outcome, Ok(Confirm::Completed)) {
            self.set_header(protocol::header::START, current + 1)?;
        }
        outcome
    }

    /// Re-runs call `call` of the batch in the arena alone (the driver copies its inputs again),
    /// with memory hooks on exact pages `pages` and on each further suspect page, which see
    /// every access whole, with its pc ([`exact_hook`](Self::exact_hook)). Leaves `start` and
    /// `ncalls` of the header at `call` and `call + 1`.
    pub(super) fn confirm_call(
        &mut self,
        call: u64,
        pages: &[u64],
        fragments: &[(u64, u64)],
    ) -> Result<Confirm, BackendError> {
        self.set_header(protocol::header::START, call)?;
        self.set_header(protocol::header::NCALLS, call + 1)?;
        {
            let mut st = self.state.borrow_mut();
            st.to_explain = fragments.to_vec();
            st.confirming = Some(call);
        }
        let mut hooks = Vec::new();
        let mut pending = pages.to_vec();
        let outcome = loop {
            let hooked = pending.drain(..).try_for_each(|page| {
                self.state.borrow_mut().hooked.push(page);
                self.exact_hook(page, &mut hooks)
            });
            let (result, pc) = match hooked.and_then(|()| self.start()) {
                Ok(r) => r,
                Err(e) => break Err(e),
            };
            let st = self.state.borrow();
            if st.seen.pinned.is_some() {
                break Ok(Confirm::Pinned);
            }
            match st.seen.suspect.map(|p| p.page).filter(|p| !st.hooked.contains(p)) {
                Some(p) => pending.push(p),
                None if result.is_ok() && pc == self.halt && st.refused.is_none() => {
                    break Ok(st
                        .to_explain
                        .first()
                        .map_or(Confirm::Completed, |&fragment| Confirm::Unrepeated(fragment)))
                }
                None => break Ok(Confirm::Stopped(result, pc)),
            }
        };
        for h in hooks {
            let _ = self.uc.remove_hook(h);
        }
        let mut st = self.state.borrow_mut();
        st.hooked.clear();
        st.to_explain.clear();
        st.confirming = None;
        outcome
    }

    /// Re-runs alone each call of a finished batch that made a read noted in
    /// [`HookState::deferred`], under memory hooks that must see the accesses the noted fragments
    /// came from. The calls of a batch start from copies of earlier calls' outputs into buffers
    /// of their own, and later calls write only their own, so a call's re-run reads what it
    /// read. A call whose re-run touches a byte outside its buffer, or explains none of a noted
    /// fragment, goes to [`proven`](Self::proven). Returns whether a re-run stopped otherwise (then
    /// the batch must run again). The header is left as the batch left it.
    pub(super) fn confirm_deferred(&mut self, deferred: &mut [(u64, Fragment)]) -> Result<bool, BackendError> {
        let start = self.header(protocol::header::START)?;
        let ncalls = self.header(protocol::header::NCALLS)?;
        deferred.sort_unstable();
        let mut stopped = false;
        for group in deferred.chunk_by(|a, b| a.0 == b.0) {
            let call = group[0].0;
            let mut pages: Vec<u64> = group.iter().map(|&(_, p)| p.page).collect();
            pages.dedup();
            let fragments: Vec<(u64, u64)> = group.iter().map(|&(_, p)| (p.lo, p.hi)).collect();
            let fault = match self.confirm_call(call, &pages, &fragments)? {
                Confirm::Completed => continue,
                Confirm::Unrepeated(fragment) => {
                    let (access, addr) = self.unrepeated(fragment, false);
                    let kind = FaultKind::Memory { access: Some(access), addr: Some(addr) };
                    Fault { kind, pc: None, call: None, detail: UNREPEATED.into() }
                }
                Confirm::Pinned => {
                    let pc = self.state.borrow().seen.pinned.unwrap_or(0);
                    let Some((kind, pc, detail)) = self.classify(Ok(()), pc) else { continue };
                    Fault { kind, pc: Some(pc), call: None, detail }
                }
                Confirm::Stopped(..) => {
                    stopped = true;
                    break;
                }
            };
            self.proven.insert(call, Fault { call: usize::try_from(call).ok(), ..fault });
        }
        self.set_header(protocol::header::START, start)?;
        self.set_header(protocol::header::NCALLS, ncalls)?;
        Ok(stopped)
    }

    /// Makes `run` end in the fault of the first [`proven`](Self::proven) call, when it ends
    /// later (or not at all): a kernel that behaves when a call runs again (it can tell, from
    /// the stack it left or the driver's header) must not pass by it.
    pub(super) fn apply_proven(&mut self, run: &mut RawRun) {
        let at = run.fault.as_ref().map_or(Some(u64::MAX), |f| f.call.map(|c| c as u64));
        if let (Some(at), Some(entry)) = (at, self.proven.first_entry()) {
            if *entry.key() < at {
                run.fault = Some(entry.remove());
            }
        }
    }

    /// The first run of the batch `payload` the arena holds (with its protections set): reads
    /// that may be fragments of legal unaligned loads are noted, not stopped at
    /// ([`HookState::allowed`]), and afterwards each call that made one runs again alone under
    /// memory hooks ([`confirm_deferred`](Self::confirm_deferred)). If one of them touches a byte
    /// outside its buffer, or the batch faulted, the batch runs again from `payload`, stopping
    /// at every suspect, so that what comes back is what a run stopping at once gives. A call
    /// whose re-run explains none of a noted fragment fails with it: a kernel that behaves one
    /// way when first run and another when run again must not pass by it.
    pub(super) fn run_first(&mut self, payload: &[u8], resp_len: usize) -> Result<RawRun, BackendError> {
        {
            let mut st = self.state.borrow_mut();
            st.defer_reads = true;
            st.deferred.clear();
        }
        let run = self.run_loaded(resp_len, resp_len);
        let mut deferred = {
            let mut st = self.state.borrow_mut();
            st.defer_reads = false;
            std::mem::take(&mut st.deferred)
        };
        let mut run = run?;
        let rerun = match (deferred.is_empty(), &run.fault) {
            (true, _) => false,
            (false, Some(_)) => true,
            (false, None) => self.confirm_deferred(&mut deferred)?,
        };
        deferred.clear();
        self.state.borrow_mut().deferred = deferred;
        if rerun {
            run = self.rerun(run.resp, payload, resp_len)?;
        }
        self.apply_proven(&mut run);
        Ok(run)
    }

    /// Runs the batch `payload` again from the start, stopping at every suspect (after a first
    /// run whose response `resp` is given back).
    pub(super) fn rerun(&mut self, resp: Vec<u8>, payload: &[u8], resp_len: usize) -> Result<RawRun, BackendError> {
        self.recycle(resp);
        self.write_arena(payload)?;
        self.load_protections(payload);
        self.run_loaded(resp_len, resp_len)
    }

    /// The access and first byte outside its buffer of a noted fragment `[lo, hi)` (a write if
    /// `write`) that a re-run did not explain.
    pub(super) fn unrepeated(&self, (lo, hi): (u64, u64), write: bool) -> (Access, u64) {
        let st = self.state.borrow();
        let first = st.outside(lo & !(PAGE - 1), lo, hi - lo).unwrap_or(lo);
        (if write { Access::Write } else { Access::Read }, first)
    }
}
