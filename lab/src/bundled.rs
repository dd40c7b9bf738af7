//! The kernels and vectors compiled into the binary (build.rs embeds every file under
//! `kernels/` and `vectors/`), so an installed `lab` needs no checkout. clang reads files, so
//! they are written once into the cache, into a folder named by their content hash.

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

mod files {
    include!(concat!(env!("OUT_DIR"), "/bundled.rs"));
}

pub use files::FILES;

/// First 16 hex digits of the SHA-256 of every bundled path and its contents.
pub fn content_hash() -> String {
    let mut h = Sha256::new();
    for (path, data) in FILES {
        h.update((path.len() as u64).to_le_bytes());
        h.update(path.as_bytes());
        h.update((data.len() as u64).to_le_bytes());
        h.update(data);
    }
    h.finalize()[..8].iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// The first file of the extracted copy at `dest` that is missing or differs from the bytes
/// built into this binary (about 1 MB read per run; the copy is what clang assembles).
pub fn changed(dest: &Path) -> Option<PathBuf> {
    FILES.iter().map(|(rel, data)| (dest.join(rel), data)).find_map(|(path, data)| {
        let same = std::fs::read(&path).is_ok_and(|on_disk| on_disk == *data);
        (!same).then_some(path)
    })
}

/// The folder `cache/bundled-<hash>/` holding `kernels/` and `vectors/` as built into this
/// binary; written on first use (into a private folder, then renamed into place, so a half
/// written copy is never used and concurrent runs agree).
///
/// # Errors
/// The I/O error of creating or writing the folder, naming the path.
pub fn extract(cache: &Path) -> Result<PathBuf, String> {
    let dest = cache.join(format!("bundled-{}", content_hash()));
    if dest.is_dir() {
        match changed(&dest) {
            None => return Ok(dest),
            Some(file) => {
                // An edited driver copy must not change what the lab checks: write it anew.
                eprintln!("lab: cached {} differs from the copy built into lab: writing it again", file.display());
                let _ = std::fs::remove_dir_all(&dest);
            }
        }
    }
    let named = |p: &Path| {
        let p = p.to_path_buf();
        move |e: io::Error| format!("{}: {e}", p.display())
    };
    std::fs::create_dir_all(cache).map_err(named(cache))?;
    let tmp = tempfile::Builder::new().prefix(".bundled-").tempdir_in(cache).map_err(named(cache))?;
    for (rel, data) in FILES {
        let path = tmp.path().join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(named(parent))?;
        }
        std::fs::write(&path, data).map_err(named(&path))?;
    }
    let tmp = tmp.keep();
    if std::fs::rename(&tmp, &dest).is_err() && !dest.is_dir() {
        return Err(format!("{}: could not move the bundled files into place", dest.display()));
    }
    let _ = std::fs::remove_dir_all(&tmp);
    Ok(dest)
}

#[cfg(test)]
mod seal_tests {
    use super::*;

    #[test]
    fn an_edited_cached_copy_is_written_again() {
        let cache = tempfile::tempdir().unwrap();
        let dest = extract(cache.path()).unwrap();
        assert_eq!(changed(&dest), None);
        let driver = dest.join("kernels/x86_64/driver.S");
        let text = std::fs::read_to_string(&driver).unwrap();
        std::fs::write(&driver, text.lines().skip(1).collect::<Vec<_>>().join("\n")).unwrap();
        assert_eq!(changed(&dest), Some(driver.clone()));
        assert_eq!(extract(cache.path()).unwrap(), dest);
        assert_eq!(std::fs::read_to_string(&driver).unwrap(), text, "the copy built into lab again");
    }
}
