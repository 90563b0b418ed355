//! The trimmed topic (retention and DeleteRecords on a live log):
//! trimmed-write-lost, delete-records-undone, and its liveness.

use std::collections::BTreeMap;

use crate::workload::Event;

use super::Invariant;

/// Judges the trimmer's history on its own: it writes only its topic.
pub(super) fn check(events: &[(std::time::Duration, Event)], out: &mut Vec<String>) {
    let mut finals: BTreeMap<i32, (i64, BTreeMap<i64, &str>)> = BTreeMap::new();
    for (_, e) in events {
        if let Event::TrimFinal {
            partition,
            start,
            records,
        } = e
        {
            let mut expected = *start;
            for (offset, _) in records {
                if *offset != expected {
                    out.push(Invariant::PollSkip.says(format!(
                        "final read of trimmed partition {partition} jumped from offset {expected} to {offset}"
                    )));
                }
                expected = offset + 1;
            }
            let by_offset = records.iter().map(|(o, v)| (*o, v.as_str())).collect();
            finals.insert(*partition, (*start, by_offset));
        }
    }
    // Per partition: the acknowledged DeleteRecords so far, as (answered
    // at, low watermark), for the log starts leaders answer afterwards.
    let mut acked: BTreeMap<i32, Vec<(std::time::Duration, i64)>> = BTreeMap::new();
    let mut written: BTreeMap<i32, usize> = BTreeMap::new();
    for (at, e) in events {
        match e {
            Event::TrimProduced {
                partition,
                offset,
                value,
            } => {
                *written.entry(*partition).or_default() += 1;
                let Some((start, log)) = finals.get(partition) else {
                    continue; // reported as liveness
                };
                if offset < start {
                    continue; // trimmed away: allowed
                }
                match log.get(offset) {
                    Some(v) if *v == value.as_str() => {}
                    found => out.push(Invariant::TrimmedWriteLost.says(format!(
                        "{value} was acknowledged at {partition}/{offset} (at {:.3}s), above the final log start {start}, and the log has {found:?} there",
                        at.as_secs_f64()
                    ))),
                }
            }
            Event::Trimmed {
                partition,
                low_watermark,
                ..
            } => {
                acked
                    .entry(*partition)
                    .or_default()
                    .push((*at, *low_watermark));
                if let Some((start, _)) = finals.get(partition) {
                    if start < low_watermark {
                        out.push(Invariant::DeleteRecordsUndone.says(format!(
                            "DeleteRecords of trimmed partition {partition} answered log start {low_watermark} at {:.3}s, the final log starts at {start}",
                            at.as_secs_f64()
                        )));
                    }
                }
            }
            Event::TrimStart {
                partition,
                sent,
                start,
            } => {
                let before = acked.get(partition).into_iter().flatten();
                if let Some((answered, low)) = before
                    .filter(|(answered, _)| answered < sent)
                    .max_by_key(|(_, low)| *low)
                {
                    if start < low {
                        out.push(Invariant::DeleteRecordsUndone.says(format!(
                            "DeleteRecords of trimmed partition {partition} answered log start {low} at {:.3}s; a ListOffsets sent at {:.3}s answered {start}",
                            answered.as_secs_f64(),
                            sent.as_secs_f64()
                        )));
                    }
                }
            }
            _ => {}
        }
    }
    for partition in written.keys() {
        if !finals.contains_key(partition) {
            out.push(Invariant::Liveness.says(format!(
                "trimmed partition {partition} was not readable from its log start after the faults healed"
            )));
        }
    }
}
