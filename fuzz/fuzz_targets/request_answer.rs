#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| broker::fuzz::request_answer(data));
