#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| kresidue::fuzzing::crio_docker_json(data));
