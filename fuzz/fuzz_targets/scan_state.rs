#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| kresidue::fuzzing::scan_state(data));
