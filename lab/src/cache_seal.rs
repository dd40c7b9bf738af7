//! Seals for the files the lab caches (built images, assembled driver objects): a
//! `<file>.sha256` beside each one, written when the file is put into the cache and checked
//! before every use, so a cached file changed on disk (a flipped bit, a truncated image, an
//! edited object) is rebuilt instead of trusted. The bundled kernels and vectors are checked
//! against the copy built into the binary instead ([`crate::bundled::extract`]).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The seal file of `file`: `<file>.sha256`.
pub fn seal_path(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".sha256");
    PathBuf::from(name)
}

/// Hex SHA-256 of `bytes`.
fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Writes the seal of `file` (its SHA-256) beside it.
///
/// # Errors
/// The I/O error of reading `file` or writing the seal.
pub fn seal(file: &Path) -> std::io::Result<()> {
    let bytes = std::fs::read(file)?;
    std::fs::write(seal_path(file), hex_sha256(&bytes) + "\n")
}

/// Whether `file` still holds what was sealed. `Err` says why not: no seal, unreadable, or a
/// different hash (a changed, truncated or corrupted file).
pub fn verify(file: &Path) -> Result<(), String> {
    let want = std::fs::read_to_string(seal_path(file)).map_err(|e| format!("no seal ({e})"))?;
    let bytes = std::fs::read(file).map_err(|e| format!("cannot read it ({e})"))?;
    let got = hex_sha256(&bytes);
    if got == want.trim() {
        Ok(())
    } else {
        Err(format!("its SHA-256 is {got}, not the {} it was built with", want.trim()))
    }
}

/// Every sealed file under `dir` (the cache) that fails [`verify`], with the reason; files
/// without a seal that should have one (`lab.elf`, `objects/*.o`; an image cached by a lab
/// before seals) are listed too. For `lab doctor`.
pub fn check_tree(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut bad = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            let Ok(t) = e.file_type() else { continue };
            if t.is_dir() && !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')) {
                stack.push(p);
            } else if t.is_file() && sealed_kind(&p) {
                if let Err(why) = verify(&p) {
                    bad.push((p, why));
                }
            }
        }
    }
    bad.sort();
    bad
}

/// Whether the lab seals files like `p`: images (`lab.elf`) and the cached driver objects
/// (`objects/*.o`; the kernels' own objects beside an image are build leftovers, not reused).
fn sealed_kind(p: &Path) -> bool {
    let in_objects = p.parent().and_then(Path::file_name).is_some_and(|d| d == "objects");
    p.file_name().is_some_and(|n| n == "lab.elf") || (in_objects && p.extension().is_some_and(|x| x == "o"))
}

/// Takes a cached `file` when its seal holds; otherwise removes it (and its seal), says so on
/// stderr, and returns `false` so the caller rebuilds it.
pub fn usable(file: &Path) -> bool {
    if !file.is_file() {
        return false;
    }
    match verify(file) {
        Ok(()) => true,
        Err(why) => {
            eprintln!("lab: cached {} is not what was built ({why}): building it again", file.display());
            let _ = std::fs::remove_file(file);
            let _ = std::fs::remove_file(seal_path(file));
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_or_unsealed_file_is_not_usable_and_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("lab.elf");
        std::fs::write(&f, b"\x7fELF image").unwrap();
        assert!(!usable(&f), "no seal yet");
        assert!(!f.exists(), "removed");
        std::fs::write(&f, b"\x7fELF image").unwrap();
        seal(&f).unwrap();
        assert!(usable(&f));
        assert!(check_tree(dir.path()).is_empty());
        std::fs::write(&f, b"\x7fELF imagE").unwrap();
        let bad = check_tree(dir.path());
        assert_eq!(bad.len(), 1);
        assert!(bad[0].1.contains("not the") && bad[0].1.contains("it was built with"), "{:?}", bad);
        assert!(!usable(&f));
        assert!(!f.exists() && !seal_path(&f).exists());
    }
}
