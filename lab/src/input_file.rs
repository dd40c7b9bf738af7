//! Reading a user's input file (vector file, manifest, bench baseline): a regular file of
//! bounded size, opened without blocking, so a FIFO, a device such as `/dev/zero` or a huge
//! file is refused with a sentence instead of hanging the lab or filling its memory.

use std::io::Read as _;
use std::path::Path;

/// Reads the regular file `path` of at most `cap` bytes as UTF-8 text. `what` names the kind
/// of file in the errors ("a vector file").
///
/// # Errors
/// A sentence without the path (callers put it first): cannot be opened or read, not a regular
/// file (directory, FIFO, device), over `cap` bytes, or not UTF-8.
pub fn read_regular(path: &Path, cap: u64, what: &str) -> Result<String, String> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .map_err(|e| format!("cannot read: {e}"))?;
    let meta = file.metadata().map_err(|e| format!("cannot read: {e}"))?;
    if !meta.is_file() {
        return Err(format!("not a regular file (a directory, FIFO or device): {what} must be a regular file"));
    }
    if meta.len() > cap {
        return Err(format!("{} bytes, more than {what} may have ({cap})", meta.len()));
    }
    let mut bytes = Vec::new();
    file.take(cap + 1).read_to_end(&mut bytes).map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 > cap {
        return Err(format!("more than {cap} bytes, more than {what} may have"));
    }
    String::from_utf8(bytes).map_err(|e| format!("not UTF-8 text: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_directories_and_big_files_are_refused() {
        let e = read_regular(Path::new("/dev/zero"), 10, "a manifest").unwrap_err();
        assert!(e.starts_with("not a regular file") && e.ends_with("a manifest must be a regular file"), "{e}");
        assert!(read_regular(Path::new("/"), 10, "x").unwrap_err().starts_with("not a regular file"));
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), "0123456789A").unwrap();
        assert_eq!(
            read_regular(f.path(), 10, "a baseline").unwrap_err(),
            "11 bytes, more than a baseline may have (10)"
        );
        assert_eq!(read_regular(f.path(), 11, "x").unwrap(), "0123456789A");
    }
}
