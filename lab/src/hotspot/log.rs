//! HotSpot's `-XX:+PrintStubCode` output: one block per generated stub,
//!
//! ```text
//! StubRoutines::md5_implCompressMB [0x00007fe81d4409c0, 0x00007fe81d441086] (1734 bytes)
//! [MachCode]
//!   0x00007fe81d4409c0: 5548 8bec | 5357 5641 | ...
//! [/MachCode]
//! ```
//!
//! Without the hsdis plugin HotSpot prints the code as hex, 32 bytes a line in 4-byte groups,
//! and on x86 it stops before a last group of fewer than 4 bytes (it takes every x86
//! instruction as 4 bytes long), so the printed bytes of a stub can be short of its range. The
//! range itself (`[start, end)`, and the byte count) is exact: [`crate::hotspot::jvm`] reads the
//! bytes from the live JVM; a capture from a saved log refuses a stub printed short.

/// One stub as the log prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrintedStub {
    /// HotSpot's name without the `StubRoutines::` prefix (`md5_implCompressMB`).
    pub name: String,
    /// First byte of the stub in the JVM's code cache.
    pub start: u64,
    /// One past its last byte.
    pub end: u64,
    /// The bytes printed under `[MachCode]` (possibly fewer than `end - start`; none when the
    /// code was printed as disassembly by hsdis).
    pub printed: Vec<u8>,
}

impl PrintedStub {
    /// The stub's size in bytes (`end - start`).
    pub fn size(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }
}

/// The `StubRoutines::` blocks of a `-XX:+PrintStubCode` log, in log order. Lines that belong
/// to no stub block (the program's own output, other `-XX:+Print...` output) are ignored.
pub fn parse(text: &str) -> Vec<PrintedStub> {
    let mut out: Vec<PrintedStub> = Vec::new();
    let mut in_code = false;
    for line in text.lines() {
        if let Some(stub) = header(line) {
            out.push(stub);
            in_code = false;
            continue;
        }
        match line.trim() {
            "[MachCode]" => in_code = !out.is_empty(),
            "[/MachCode]" => in_code = false,
            code if in_code => {
                if let (Some(stub), Some(bytes)) = (out.last_mut(), hex_line(code)) {
                    stub.printed.extend(bytes);
                }
            }
            _ => {}
        }
    }
    out
}

/// `StubRoutines::NAME [0xSTART, 0xEND] (N bytes)` (names may hold spaces).
fn header(line: &str) -> Option<PrintedStub> {
    let rest = line.trim().strip_prefix("StubRoutines::")?;
    let (name, range) = rest.split_once(" [0x")?;
    let (start, rest) = range.split_once(", 0x")?;
    let (end, _) = rest.split_once(']')?;
    let start = u64::from_str_radix(start, 16).ok()?;
    let end = u64::from_str_radix(end, 16).ok()?;
    (end >= start).then(|| PrintedStub { name: name.trim().to_string(), start, end, printed: Vec::new() })
}

/// `0x00007fe81d4409c0: 5548 8bec | 5357 5641` -> the bytes in address order.
fn hex_line(line: &str) -> Option<Vec<u8>> {
    let (addr, hex) = line.split_once(':')?;
    u64::from_str_radix(addr.trim().strip_prefix("0x")?, 16).ok()?;
    let digits: String = hex.chars().filter(|c| !c.is_whitespace() && *c != '|').collect();
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    (0..digits.len()).step_by(2).map(|i| u8::from_str_radix(&digits[i..i + 2], 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_headers_and_grouped_hex() {
        let log = "noise\n- - - [BEGIN] - -\nStubRoutines::forward exception [0x0000000000001000, 0x0000000000001006] (6 bytes)\n\
                   [MachCode]\n  0x0000000000001000: 5548 8bec | \n[/MachCode]\n\
                   StubRoutines::md5_implCompress [0x0000000000002000, 0x0000000000002004] (4 bytes)\n\
                   [MachCode]\n  0x0000000000002000: c3c3 90cc | \n[/MachCode]\nLAB-READY\n";
        let s = parse(log);
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].name.as_str(), s[0].start, s[0].size()), ("forward exception", 0x1000, 6));
        assert_eq!(s[0].printed, vec![0x55, 0x48, 0x8b, 0xec], "a printed stub may be short of its range");
        assert_eq!((s[1].name.as_str(), s[1].printed.as_slice()), ("md5_implCompress", &[0xc3, 0xc3, 0x90, 0xcc][..]));
    }

    #[test]
    fn ignores_malformed_lines() {
        assert!(header("StubRoutines::x [0x10, 0xzz] (1 bytes)").is_none());
        assert!(header("StubRoutines::x [0x20, 0x10] (1 bytes)").is_none(), "end before start");
        assert_eq!(hex_line("0x10: 5548 8"), None);
        assert_eq!(hex_line("0x10: 5548 | 8bec"), Some(vec![0x55, 0x48, 0x8b, 0xec]));
    }
}
