//! One line per event, as the trace shows it.

use super::Event;
use crate::workload::TOPIC;

/// `e` in one line of the trace.
pub fn describe(e: &Event) -> String {
    clients(e)
        .or_else(|| trimmed_and_compacted(e))
        .or_else(|| transactions(e))
        .or_else(|| operators(e))
        .unwrap_or_else(|| format!("{e:?}"))
}

/// The workload's clients: producers, the consumer and its group, the churning admin, the producer-id racer.
fn clients(e: &Event) -> Option<String> {
    Some(match e {
        Event::Produce {
            client,
            partition,
            value,
            outcome,
            ..
        } => format!("{client} produce {partition} {value} -> {outcome:?}"),
        Event::Poll {
            client,
            partition,
            from,
            got,
        } => format!(
            "{client} poll {partition}@{from} -> {} records{}",
            got.len(),
            got.last()
                .map_or(String::new(), |(o, _)| format!(" up to {o}"))
        ),
        Event::Commit {
            group,
            partition,
            offset,
            acked,
        } => format!(
            "commit {group} {partition}@{offset} -> {}",
            if *acked { "ok" } else { "failed" }
        ),
        Event::Committed {
            group,
            partition,
            offset,
            ..
        } => format!("offset-fetch {group} {partition} -> {offset}"),
        Event::Assigned {
            member,
            generation,
            partitions,
        } => format!("{member} generation {generation} owns {partitions:?}"),
        Event::HoldersOnVolume { holders, .. } => {
            format!("next-group holders on the volume: {holders:?}")
        }
        Event::Holds {
            member,
            partitions,
            until,
        } => format!(
            "next-group member {member} holds {partitions:?} until {:.3}s",
            until.as_secs_f64()
        ),
        Event::ChurnRead {
            incarnation,
            values,
            ..
        } => format!("admin read churn#{incarnation} -> {} records", values.len()),
        Event::DeletedRead {
            incarnation,
            values,
        } => format!(
            "admin read deleted churn#{incarnation} -> {} records",
            values.len()
        ),
        Event::Deleted {
            topic_id,
            acknowledged: true,
            ..
        } => format!("admin deleted topic {topic_id}"),
        Event::Deleted { topic_id, .. } => {
            format!("admin deleted topic {topic_id} (in doubt: no answer, then gone)")
        }
        Event::Metadata {
            client,
            broker,
            topic_id,
            partitions,
            ..
        } => format!("{client} metadata broker-{broker} {topic_id} {partitions:?}"),
        Event::Admin {
            client,
            topic,
            grow,
            broker,
            answer,
            ..
        } => format!(
            "{client} {} {topic} via broker-{broker} -> {}",
            if *grow { "grow" } else { "create" },
            answer
                .as_ref()
                .map_or("no answer".to_owned(), |(c, m)| format!("{c} {m}"))
        ),
        Event::GroupOnVolume {
            group,
            offsets,
            file_epoch,
            newest_epoch,
            ..
        } => format!(
            "group {group} on the volume: {offsets:?} in the file of epoch {file_epoch:?} (newest claim {newest_epoch})"
        ),
        Event::ProducerId { client, broker, id } => {
            format!("{client} init-producer-id broker-{broker} -> {id}")
        }
        Event::NewTopicWritable {
            topic,
            answered,
            writable,
            settle,
        } => format!(
            "new-topic-writable {topic} answered={:.3}s writable={:.3}s settle={:.3}s",
            answered.as_secs_f64(),
            writable.as_secs_f64(),
            settle.as_secs_f64()
        ),
        _ => return None,
    })
}

/// The trimmed and the compacted topics, and the repairer.
fn trimmed_and_compacted(e: &Event) -> Option<String> {
    Some(match e {
        Event::TrimProduced {
            partition,
            offset,
            value,
        } => format!("trimmer produced {value} at {partition}/{offset}"),
        Event::Trimmed {
            partition,
            asked,
            low_watermark,
        } => format!(
            "trimmer deleted records of {partition} below {asked}: log start {low_watermark}"
        ),
        Event::TrimStart {
            partition, start, ..
        } => format!("trimmer saw log start {start} of {partition}"),
        Event::CompactSent {
            partition,
            key,
            value,
        } => format!("compactor sends {key}={value:?} to {partition}"),
        Event::CompactProduced {
            partition,
            offset,
            key,
            value,
            ..
        } => format!("compactor produced {key}={value:?} at {partition}/{offset}"),
        Event::CompactRead {
            partition,
            started,
            records,
        } => format!(
            "compactor read {partition} whole from {:.3}s: {} records",
            started.as_secs_f64(),
            records.len()
        ),
        Event::CompactTxnSent {
            label,
            partition,
            records,
        } => format!("compactor transaction {label} sends {records:?} to {partition}"),
        Event::CompactTxnProduced { label, offset } => {
            format!("compactor transaction {label} written at {offset}")
        }
        Event::CompactTxnEnd {
            label,
            commit,
            outcome,
        } => format!(
            "compactor transaction {label} {} -> {outcome:?}",
            if *commit { "commit" } else { "abort" }
        ),
        Event::Repaired { removed, pending } => {
            format!("repaired removed={removed:?} pending={pending}")
        }
        Event::Truncated {
            partition,
            epoch,
            given_up,
        } => format!("truncate-damaged {partition} epoch={epoch} given-up={given_up:?}"),
        Event::TrimFinal {
            partition,
            start,
            records,
        } => format!(
            "trimmer read {partition} whole: log start {start}, {} records",
            records.len()
        ),
        Event::CompactFinal {
            partition,
            records,
            settled,
        } => format!(
            "compactor read {partition} whole: {} records{}",
            records.len(),
            if *settled {
                ", each key once"
            } else {
                ", some keys more than once"
            }
        ),
        _ => return None,
    })
}

/// Transactions: the transactors, their reader and the final pipeliner.
fn transactions(e: &Event) -> Option<String> {
    Some(match e {
        Event::TxnInit {
            client,
            transactional_id,
            from: None,
            producer,
        } => format!("{client} init {transactional_id} -> producer {producer:?}"),
        Event::TxnInit {
            client,
            transactional_id,
            from: Some(from),
            producer,
        } => format!("{client} bump {transactional_id} {from:?} -> producer {producer:?}"),
        Event::TxnBumpFenced {
            client,
            transactional_id,
            producer,
            own,
        } => format!(
            "{client} bump of {transactional_id} as {producer:?} -> PRODUCER_FENCED (only producer: {own})"
        ),
        Event::TxnWrite {
            client,
            label,
            value,
            producer,
            outcome,
            ..
        } => format!("{client} txn {label} write {value} as {producer:?} -> {outcome:?}"),
        Event::TxnEnd {
            client,
            label,
            commit,
            offsets,
            outcome,
            ..
        } => format!(
            "{client} txn {label} {} (offsets {offsets:?}) -> {outcome:?}",
            if *commit { "commit" } else { "abort" }
        ),
        Event::TxnPoll {
            partition,
            from,
            got,
        } => format!(
            "txn-reader poll {partition}@{from} -> {:?}",
            got.iter()
                .map(|(o, v)| format!("{o}:{v}"))
                .collect::<Vec<_>>()
        ),
        Event::TxnFinal { partition, records } => {
            format!("txn final read of {partition}: {} records", records.len())
        }
        Event::TxnOffsetsFinal { offsets } => format!("txn group offsets at the end: {offsets:?}"),
        Event::FinalRequests {
            client,
            sent,
            timed_out,
            transactions,
            wanted,
        } => format!(
            "{client} sent {sent} requests pipelined, {} unanswered {timed_out:?}, finished {transactions} of {wanted} transactions",
            timed_out.len()
        ),
        Event::TxnRogueOffsets {
            client,
            label,
            code,
        } => format!("{client} txn {label} offsets for a group never added -> {code:?}"),
        Event::TxnRogueFinal { offsets } => {
            format!("never-added group's offsets at the end: {offsets:?}")
        }
        Event::TxnOnVolume {
            transactional_id,
            producer,
            file_epoch,
            newest_epoch,
            ..
        } => format!(
            "transactional id {transactional_id} on the volume: producer {producer:?} in the file of epoch {file_epoch:?} (newest claim {newest_epoch})"
        ),
        _ => return None,
    })
}

/// Operators: ACLs, credentials, their markers, reassignments and quotas.
fn operators(e: &Event) -> Option<String> {
    Some(match e {
        Event::AclVersions { versions } => format!("acl-versions {versions:?}"),
        Event::AclChange {
            deny,
            start,
            acked,
            top,
            ..
        } => format!(
            "acl-change {} began {:.3}s acked={acked} newest-version={top:?}",
            if *deny { "deny" } else { "allow" },
            start.as_secs_f64()
        ),
        Event::AclProbe {
            broker,
            sent,
            allowed,
            version,
        } => format!(
            "acl-probe broker={broker} sent {:.3}s allowed={allowed} version={version:?}",
            sent.as_secs_f64()
        ),
        Event::CredentialVersions { versions } => format!("credential-versions {versions:?}"),
        Event::CredentialChange {
            probed,
            start,
            acked,
            top,
            ..
        } => format!(
            "credential-change to the {} password began {:.3}s acked={acked} newest-version={top:?}",
            if *probed { "probed" } else { "other" },
            start.as_secs_f64()
        ),
        Event::LoginProbe {
            broker,
            sent,
            accepted,
            version,
        } => format!(
            "login-probe broker={broker} sent {:.3}s accepted={accepted} version={version:?}",
            sent.as_secs_f64()
        ),
        Event::Reassign {
            partition,
            broker,
            sent,
            outcome,
        } => format!(
            "reassign {TOPIC}/{partition} to {broker:?} sent {:.3}s {outcome:?}",
            sent.as_secs_f64()
        ),
        Event::ReassignFinal { found } => format!("reassign-final {found:?}"),
        Event::QuotaChange {
            entity,
            key,
            rate,
            sent,
            outcome,
        } => format!(
            "quota {entity} {key}={rate:?} sent {:.3}s {outcome:?}",
            sent.as_secs_f64()
        ),
        Event::QuotaFinal { found } => format!("quota-final {found:?}"),
        Event::QuotaFetched { broker, bytes } => {
            format!("quota-fetched broker={broker} bytes={bytes}")
        }
        Event::QuotaProduced {
            from,
            to,
            rate,
            batch_bytes,
            appended,
            leaders,
            unanswered,
        } => format!(
            "quota-produced {:.3}s..{:.3}s rate={rate} batch={batch_bytes} appended={appended} \
             leaders={leaders} unanswered={unanswered}",
            from.as_secs_f64(),
            to.as_secs_f64()
        ),
        Event::QuotaWindow { from, to, rate } => format!(
            "quota-window {:.3}s..{:.3}s rate={rate}",
            from.as_secs_f64(),
            to.as_secs_f64()
        ),
        Event::SecurityMarker {
            doc,
            marker,
            start,
            acked,
        } => format!(
            "security-marker {doc} {marker} began {:.3}s acked={acked}",
            start.as_secs_f64()
        ),
        Event::AclsApplied {
            broker,
            after_heal,
            missing,
        } => format!(
            "acls-applied broker={broker} {:.3}s after the faults healed, missing {missing:?}",
            after_heal.as_secs_f64()
        ),
        Event::SecurityMarkersFinal { doc, found } => match found {
            Some((version, markers)) => {
                format!("security-markers-final {doc} version {version}: {markers:?}")
            }
            None => format!("security-markers-final {doc} unreadable"),
        },
        _ => return None,
    })
}
