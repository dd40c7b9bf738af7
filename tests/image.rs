//! ELF loading: segments, symbols and the arena come from the image itself, for every variant.

use kernel_lab::image::{Image, ImageError};
use kernel_lab::variant::{Arch, VARIANTS};

use crate::common::build;

#[test]
fn every_image_has_the_driver_symbols_and_the_arena_ends_its_last_segment() {
    for v in &VARIANTS {
        let image = build(v);
        for s in [
            "lab_batch",
            "_start",
            "lab_unicorn_halt",
            "lab_stack_top",
            "md5_implCompress",
            "md5_implCompressMB",
            "poly1305_processBlocks",
        ] {
            assert!(image.symbol(s).is_some(), "{}: no {s}", v.name);
        }
        let arena = image.arena().unwrap();
        assert_eq!(arena.addr % 4096, 0, "{}: lab_arena is page aligned", v.name);
        assert_eq!(arena.size, 32 << 20, "{}: 32 MiB arena", v.name);
        let last_end = image.segments.iter().map(|s| s.vaddr + s.memsz).max().unwrap();
        assert_eq!(arena.addr + arena.size, last_end, "{}: the arena ends the image", v.name);
        let text = image.segments.iter().find(|s| s.perms.exec).expect("a code segment");
        assert!(!text.perms.write, "{}: code is not writable", v.name);
        let mb = image.symbol("md5_implCompressMB").unwrap().addr;
        assert_eq!(image.symbolize(mb + 8), "md5_implCompressMB+0x8");
        assert_eq!(image.bytes_at(mb, 4).map(<[u8]>::len), Some(4));
    }
}

#[test]
fn an_image_for_another_machine_is_refused() {
    let image = build(&VARIANTS[0]);
    match Image::load(&image.path, Arch::X86_64) {
        Err(ImageError::WrongArch { expected: Arch::X86_64, .. }) => {}
        other => panic!("expected WrongArch, got {other:?}"),
    }
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.elf");
    std::fs::write(&junk, b"not an elf").unwrap();
    let err = Image::load(&junk, Arch::Riscv64).unwrap_err().to_string();
    assert!(err.contains("junk.elf") && err.contains("not a readable ELF64 image"), "{err}");
}
