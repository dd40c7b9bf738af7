//! What a reply token claims, checked against the call records the host reads from its own
//! mapping of the arena (issue 28, "a forged reply"). The kernel shares the guest's address
//! space and its reply fd: it can send a well-formed token itself, or jump into the driver's own
//! reply path, to end a batch early or to claim calls ran that did not. The driver's replies
//! follow from its records, so the host checks that they do:
//!
//! - a `handler` reply: nothing (it fails every call of its batch whatever it claims);
//! - a `done` reply: every call the entry was sent (`start..ncalls`) returned (`status` 1),
//!   and the header's `done` is `ncalls`;
//! - a fault reply (but the host's own poke, which may land anywhere): the call it names is one
//!   the entry was sent, and every call before it returned;
//! - every call that claims it returned has the `sp_before` the driver stores before the call:
//!   the entry's own `stack` (every driver runs the kernel on the top of its guarded stack).
//!
//! A reply that fails any of these is a forgery: the batch's results are not trusted (every call
//! of it fails with a `tamper` finding naming what the reply claimed), and the guest is restarted.
//! A kernel that writes every word of every record itself, as the driver would, and gets every
//! output right, computed the results: the host cannot tell that apart (docs/threat-model.md).

use crate::protocol::{entry, header, token};

/// The calls the host sent an entry: `start..ncalls` of the call table at arena offset
/// `table` (bytes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Sent {
    pub start: u64,
    pub ncalls: u64,
    pub table: usize,
}

impl Sent {
    /// The calls `payload`'s header names (`start`, `ncalls`, `table`), `lab_arena` at guest
    /// address `arena_addr`; none when `table` lies outside the payload.
    pub(super) fn of(payload: &[u8], arena_addr: u64) -> Sent {
        let word = |w: crate::protocol::Word| super::exchange::header_word(payload, w);
        match word(header::TABLE).checked_sub(arena_addr).and_then(|t| usize::try_from(t).ok()) {
            Some(table) if table <= payload.len() => {
                Sent { start: word(header::START), ncalls: word(header::NCALLS), table }
            }
            _ => Sent::default(),
        }
    }
}

/// Signal number of the host's poke (SIGUSR1): its fault reply may come between any two
/// instructions of the driver, so its `current` is not checked against the records.
const POKE: u64 = 10;

/// Why `reply` cannot be the driver's answer to an entry that was sent `sent`, reading arena
/// words (byte offset -> u64) through `word`; `Ok` when it is consistent with the records.
/// `entry_bytes`: bytes of one call entry.
///
/// # Errors
/// The first claim the records contradict, as a sentence.
pub(super) fn check(
    reply: &[u64; token::REPLY_WORDS],
    sent: Sent,
    entry_bytes: usize,
    word: impl Fn(usize) -> u64,
) -> Result<(), String> {
    let (start, ncalls) = (sent.start, sent.ncalls);
    if ncalls.saturating_sub(start) > (1 << 24) {
        return Ok(()); // not a table the host laid out (a raw payload): nothing to hold it to
    }
    let at = |call: u64, w: crate::protocol::Word| sent.table + call as usize * entry_bytes + w.offset();
    let returned = |upto: u64, claim: &str| -> Result<(), String> {
        for call in start..upto {
            let status = word(at(call, entry::STATUS));
            if status != 1 {
                return Err(format!("{claim}, but call {call}'s record says it did not return (status {status})"));
            }
            let (sp, stack) = (word(at(call, entry::SP_BEFORE)), word(at(call, entry::STACK)));
            if sp != stack {
                return Err(format!(
                    "{claim}, but call {call}'s record was not written by the driver: its sp_before is {sp:#x}, the \
                     driver stores the call's stack {stack:#x} there"
                ));
            }
        }
        Ok(())
    };
    match reply[token::KIND] {
        // A handler reply fails its whole batch whatever the records say (Backend::verify):
        // nothing to hold it to. The fault handler sends one too, with calls left unrun.
        token::KIND_HANDLER => Ok(()),
        token::KIND_DONE => {
            let claim = format!("the reply said calls {start}..{ncalls} all ran (done)");
            returned(ncalls, &claim)?;
            let done = word(header::DONE.offset());
            if done != ncalls && ncalls > start {
                return Err(format!("{claim}, but the header's `done` is {done}, not {ncalls}"));
            }
            Ok(())
        }
        token::KIND_FAULT if reply[token::SIGNO] != POKE => {
            let current = reply[token::CURRENT];
            if !(start..ncalls).contains(&current) {
                return Err(format!(
                    "the fault reply names call {current}, not one of the calls {start}..{ncalls} the entry was sent"
                ));
            }
            returned(current, &format!("the fault reply names call {current}"))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENTRY: usize = 8 * 20;
    const TABLE: usize = 256;

    /// An arena of `ncalls` entries whose first `returned` calls returned as the driver
    /// records them (status 1, sp_before = stack), `done` = `returned`.
    fn arena(ncalls: usize, returned: usize) -> Vec<u64> {
        let mut words = vec![0u64; (TABLE + ncalls * ENTRY) / 8];
        words[header::DONE.index] = returned as u64;
        for call in 0..ncalls {
            let base = (TABLE + call * ENTRY) / 8;
            words[base + entry::STACK.index] = 0x7000 + call as u64 * 0x1000;
            if call < returned {
                words[base + entry::STATUS.index] = 1;
                words[base + entry::SP_BEFORE.index] = words[base + entry::STACK.index];
            }
        }
        words
    }

    fn reply(kind: u64, signo: u64, current: u64) -> [u64; token::REPLY_WORDS] {
        let mut r = [0; token::REPLY_WORDS];
        (r[token::KIND], r[token::SIGNO], r[token::CURRENT]) = (kind, signo, current);
        r
    }

    fn run(words: &[u64], r: [u64; token::REPLY_WORDS], start: u64, ncalls: u64) -> Result<(), String> {
        check(&r, Sent { start, ncalls, table: TABLE }, ENTRY, |at| words.get(at / 8).copied().unwrap_or(0))
    }

    #[test]
    fn the_drivers_own_replies_hold() {
        assert_eq!(run(&arena(4, 4), reply(token::KIND_DONE, 0, 0), 0, 4), Ok(()));
        assert_eq!(run(&arena(4, 2), reply(token::KIND_FAULT, 11, 2), 0, 4), Ok(()), "a fault at call 2");
        assert_eq!(run(&arena(4, 4), reply(token::KIND_DONE, 0, 0), 3, 4), Ok(()), "a resumed entry");
        let mut resumed = arena(4, 4);
        resumed[(TABLE + ENTRY) / 8 + entry::STATUS.index] = 0; // call 1 faulted in an earlier entry
        assert_eq!(run(&resumed, reply(token::KIND_DONE, 0, 0), 2, 4), Ok(()));
        assert_eq!(run(&arena(4, 0), reply(token::KIND_FAULT, POKE, 9), 0, 4), Ok(()), "the host's poke");
    }

    /// A handler reply fails its batch whatever it claims: the fault handler sends one with
    /// the calls after the faulting one unrun, and that is no forgery.
    #[test]
    fn a_handler_reply_is_held_to_nothing() {
        assert_eq!(run(&arena(4, 2), reply(token::KIND_HANDLER, 11, 2), 0, 4), Ok(()));
        assert!(run(&arena(4, 2), reply(token::KIND_DONE, 11, 2), 0, 4).is_err(), "the same records, done: forged");
    }

    #[test]
    fn a_done_reply_with_calls_that_did_not_return_is_forged() {
        let err = run(&arena(4, 2), reply(token::KIND_DONE, 0, 0), 0, 4).unwrap_err();
        assert!(
            err.contains("calls 0..4 all ran (done), but call 2's record says it did not return (status 0)"),
            "{err}"
        );
        let mut words = arena(4, 4);
        words[header::DONE.index] = 2;
        let err = run(&words, reply(token::KIND_DONE, 0, 0), 0, 4).unwrap_err();
        assert!(err.ends_with("the header's `done` is 2, not 4"), "{err}");
    }

    #[test]
    fn a_record_the_driver_did_not_write_is_named() {
        let mut words = arena(3, 3);
        words[(TABLE + 2 * ENTRY) / 8 + entry::SP_BEFORE.index] = 0;
        let err = run(&words, reply(token::KIND_DONE, 0, 0), 0, 3).unwrap_err();
        assert!(err.contains("call 2's record was not written by the driver: its sp_before is 0x0"), "{err}");
        assert!(err.contains("stack 0x9000"), "{err}");
    }

    #[test]
    fn a_fault_reply_naming_another_call_is_forged() {
        let err = run(&arena(4, 1), reply(token::KIND_FAULT, 11, 3), 0, 4).unwrap_err();
        assert!(err.contains("names call 3, but call 1's record says it did not return"), "{err}");
        let err = run(&arena(4, 4), reply(token::KIND_FAULT, 11, 7), 0, 4).unwrap_err();
        assert!(err.contains("names call 7, not one of the calls 0..4"), "{err}");
        let err = run(&arena(4, 4), reply(token::KIND_FAULT, 11, 1), 2, 4).unwrap_err();
        assert!(err.contains("names call 1, not one of the calls 2..4"), "{err}");
    }
}
