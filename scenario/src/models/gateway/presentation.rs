//! What the report draws for the gateway: per call class (the fixture's names),
//! calls served or stopped stacked by reason, and a funnel of where calls stopped
//! (which gate, which reason) summed over classes. Built by iterating the classes and
//! the engine's [`Reason`], so a new class or reason appears without anyone editing
//! this list.

use stampede_engine::kernel::Named;
use stampede_engine::models::gateway::reason::Source;
use stampede_engine::models::gateway::Reason;

use super::IncidentSection;
use crate::models::presentation::{Hint, Presentation, Section, Segment, Window};

/// The stage a reason belongs to: the gate that refused, a timeout, or the provider.
fn stage(reason: Reason) -> String {
    match reason.source() {
        Source::Gate(gate) => format!("shed by {}", gate.name()),
        Source::Timeout => "timed out".into(),
        Source::Provider => "provider error".into(),
    }
}

fn served(metric: String) -> Segment {
    Segment { metric, label: "served".into(), stage: "served".into() }
}

fn reason_segment(metric: String, reason: Reason) -> Segment {
    Segment { metric, label: reason.name().replace('_', " "), stage: stage(reason) }
}

/// A class's bulkhead, as the hint about it needs it: the class, its slots, and
/// whether the scenario sized them (`stack.bulkhead_slots`) or took the default.
pub struct BulkheadSlots<'a> {
    pub class: &'a str,
    pub slots: u32,
    pub given: bool,
}

/// The bulkhead's refusals (full queue, deadline in the queue, CoDel) above this share
/// of a class's calls draw the hint: the default slots are the p99 of its calls in
/// flight at the sustainable rate, so more load, or a slowdown that stretches every
/// call, fills them (issue 53: the stack without fallback answered fewer turns than
/// naive retries).
pub const BULKHEAD_HINT_SHARE: f64 = 0.05;

/// `classes` (the engine's order) get a group each; `incidents` become the fault
/// windows shaded on the time series; each bulkhead in `bulkheads` gets a hint.
pub fn presentation(classes: &[&str], incidents: &[IncidentSection], bulkheads: &[BulkheadSlots]) -> Presentation {
    let groups = classes
        .iter()
        .map(|prefix| {
            let mut segments = vec![served(format!("{prefix}_served"))];
            segments.extend(
                Reason::ALL.iter().map(|&reason| reason_segment(format!("{prefix}_failed_{}", reason.name()), reason)),
            );
            (prefix.to_string(), segments)
        })
        .collect();
    let mut funnel: Vec<(Segment, Vec<String>)> = Reason::ALL
        .iter()
        .map(|&reason| {
            let metrics = classes.iter().map(|c| format!("{c}_failed_{}", reason.name())).collect();
            (reason_segment(format!("failed_{}", reason.name()), reason), metrics)
        })
        .collect();
    funnel.push((served("served".into()), classes.iter().map(|c| format!("{c}_served")).collect()));
    Presentation {
        windows: incidents
            .iter()
            .map(|i| Window {
                label: if i.tier.is_empty() { i.label() } else { format!("{} of {}", i.label(), i.tier) },
                start_s: i.start_s,
                end_s: i.start_s + i.duration_s,
            })
            .collect(),
        hints: bulkheads.iter().map(|b| bulkhead_hint(b, !incidents.is_empty())).collect(),
        recovery: None,
        sections: vec![
            Section::Outcomes {
                title: "Calls per replica by class: served, or where and why they stopped".into(),
                groups,
            },
            Section::Funnel {
                title: "Where calls stopped: every class, by gate and reason (share of calls offered)".into(),
                total_label: "share of calls offered".into(),
                segments: funnel,
            },
        ],
    }
}

/// The note for a class whose bulkhead refused calls: how its slots were sized and
/// how to raise them — by the slowdown when the scenario has an incident, by the
/// load when it has none (issue 72: it spoke of a slowdown in a run without one).
fn bulkhead_hint(b: &BulkheadSlots, incident: bool) -> Hint {
    let class = b.class;
    let sized = if b.given {
        "as stack.bulkhead_slots sets them".to_string()
    } else {
        "the default: the p99 of its calls in flight at capacity's sustainable rate, which more load or slower \
         calls overrun"
            .to_string()
    };
    let how = if incident {
        "its slots × the slowed call time ÷ the healthy one, to ride out the incident"
    } else {
        "no incident slows its calls here: the load asks more than the slots hold — its calls per second × their \
         mean time, with room for the swings"
    };
    Hint {
        numerators: Reason::ALL
            .iter()
            .filter(|r| matches!(r.source(), Source::Gate(stampede_engine::models::gateway::Gate::Bulkhead)))
            .map(|r| format!("{class}_failed_{}", r.name()))
            .collect(),
        denominator: format!("{class}_offered"),
        above: BULKHEAD_HINT_SHARE,
        text: format!(
            "{class}: its bulkhead refused {{share}} of its calls with {} slots ({sized}); raise \
             stack.bulkhead_slots.{class} ({how}), or let `stampede optimize --range \
             'stack.bulkhead_slots.{class}=LO..HI:int'` choose",
            b.slots
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::gateway::metrics::metric_table;

    /// The bulkhead note says how to size the slots by what the run had: a slowdown
    /// when the scenario has an incident, the load when it has none (issue 72: it spoke
    /// of "the slowed call time" in a run with no incident).
    #[test]
    fn the_bulkhead_note_speaks_of_a_slowdown_only_with_an_incident() {
        let b = BulkheadSlots { class: "answer", slots: 236, given: false };
        let (quiet, incident) = (bulkhead_hint(&b, false).text, bulkhead_hint(&b, true).text);
        assert!(quiet.contains("no incident slows its calls here") && !quiet.contains("slowed"), "{quiet}");
        assert!(incident.contains("the slowed call time ÷ the healthy one"), "{incident}");
        assert!(quiet.contains("stack.bulkhead_slots.answer") && incident.contains("stack.bulkhead_slots.answer"));
    }

    /// Every metric the presentation names is one the model writes.
    #[test]
    fn every_named_metric_exists() {
        let classes = ["classify", "answer", "summary", "answer_fallback"];
        let table = metric_table(&classes, Some(1), 1);
        let exists = |name: &str| table.iter().any(|m| m.def.name == name);
        for section in presentation(&classes, &[], &[]).sections {
            match section {
                Section::Outcomes { groups, .. } => {
                    assert_eq!(groups.len(), classes.len());
                    for (_, segments) in groups {
                        assert_eq!(segments.len(), 1 + Reason::ALL.len());
                        assert!(segments.iter().all(|s| exists(&s.metric)), "{segments:?}");
                    }
                }
                Section::Funnel { segments, .. } => {
                    for (_, metrics) in segments {
                        assert!(metrics.iter().all(|m| exists(m)), "{metrics:?}");
                    }
                }
                other => panic!("unexpected section {other:?}"),
            }
        }
    }
}
