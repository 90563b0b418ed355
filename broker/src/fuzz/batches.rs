//! Record sets as a produce request carries them.

use crate::log::batch;

/// The first byte says whether to fix the batches' CRCs first (bit 0), so
/// that the fuzzer reaches the record parsing behind the checksum; the
/// rest is the record set.
pub fn record_set(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let mut set = rest.to_vec();
    if flags & 1 != 0 {
        fix_crcs(&mut set);
    }
    let Ok(headers) = batch::split(&set) else {
        let _ = batch::parse(&set);
        return;
    };
    let mut at = 0;
    for h in headers {
        let one = &set[at..at + h.size];
        let _ = batch::decode_values(one);
        let _ = batch::record_times(one);
        let _ = batch::offset_of_max_timestamp(one);
        let _ = h.last_offset();
        at += h.size;
    }
}

/// Rewrites the CRC of every batch whose length field fits in `set`.
pub(super) fn fix_crcs(set: &mut [u8]) {
    let mut at = 0;
    while let Some(size) = set.get(at..).and_then(batch::peek_size) {
        if size < batch::HEADER_LEN || at + size > set.len() {
            return;
        }
        batch::restamp_crc(&mut set[at..at + size]);
        at += size;
    }
}
