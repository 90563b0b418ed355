//! The trimmed topic (retention and DeleteRecords on a live log):
//! trimmed-write-lost, delete-records-undone, and its liveness.

use std::collections::BTreeMap;

use crate::history::Event;

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    fn judged(events: &[(Duration, Event)]) -> Vec<String> {
        let mut out = Vec::new();
        check(events, &mut out);
        out
    }

    fn final_read(start: i64, records: &[(i64, &str)]) -> (Duration, Event) {
        (
            at(90_000),
            Event::TrimFinal {
                partition: 0,
                start,
                records: records.iter().map(|(o, v)| (*o, (*v).to_owned())).collect(),
            },
        )
    }

    fn trimmed(ms: u64, low_watermark: i64) -> (Duration, Event) {
        (
            at(ms),
            Event::Trimmed {
                partition: 0,
                asked: low_watermark,
                low_watermark,
            },
        )
    }

    fn start_seen(sent: u64, answered: u64, start: i64) -> (Duration, Event) {
        (
            at(answered),
            Event::TrimStart {
                partition: 0,
                sent: at(sent),
                start,
            },
        )
    }

    #[test]
    fn a_log_start_below_an_acknowledged_delete_records_is_reported() {
        let end = final_read(5, &[(5, "v5")]);
        // Asked after the answer: the log start must not be below it.
        let undone = judged(&[trimmed(1_000, 5), start_seen(1_200, 1_300, 2), end.clone()]);
        assert_eq!(undone.len(), 1, "{undone:?}");
        assert!(undone[0].starts_with("delete-records-undone"), "{undone:?}");
        // Asked before the answer arrived: it may still see the old start.
        assert!(judged(&[start_seen(900, 1_100, 2), trimmed(1_000, 5), end.clone()]).is_empty());
        assert!(judged(&[trimmed(1_000, 5), start_seen(1_200, 1_300, 7), end]).is_empty());
        let final_below = judged(&[trimmed(1_000, 5), final_read(3, &[(3, "v3")])]);
        assert_eq!(final_below.len(), 1, "{final_below:?}");
        assert!(final_below[0].starts_with("delete-records-undone"));
    }

    #[test]
    fn an_acknowledged_record_above_the_final_log_start_must_be_there() {
        let produced = |offset: i64, value: &str| {
            (
                at(500),
                Event::TrimProduced {
                    partition: 0,
                    offset,
                    value: value.to_owned(),
                },
            )
        };
        assert!(
            judged(&[
                produced(1, "v1"),
                produced(2, "v2"),
                final_read(2, &[(2, "v2")])
            ])
            .is_empty()
        );
        let lost = judged(&[
            produced(2, "v2"),
            produced(3, "v3"),
            final_read(2, &[(2, "v2")]),
        ]);
        assert_eq!(lost.len(), 1, "{lost:?}");
        assert!(lost[0].starts_with("trimmed-write-lost"), "{lost:?}");
    }
}
