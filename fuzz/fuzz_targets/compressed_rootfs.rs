#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| kresidue::fuzzing::compressed_rootfs(data));
