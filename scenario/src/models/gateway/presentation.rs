//! What the report draws for the gateway: per call class (the fixture's names),
//! calls served or stopped stacked by reason, and a funnel of where calls stopped
//! (which gate, which reason) summed over classes. Built by iterating the classes and
//! the engine's [`Reason`], so a new class or reason appears without anyone editing
//! this list.

use stampede_engine::kernel::Named;
use stampede_engine::models::gateway::reason::Source;
use stampede_engine::models::gateway::Reason;

use super::IncidentSection;
use crate::models::presentation::{Presentation, Section, Segment, Window};

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

/// `classes` (the engine's order) get a group each; `incidents` become the fault
/// windows shaded on the time series.
pub fn presentation(classes: &[&str], incidents: &[IncidentSection]) -> Presentation {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::gateway::metrics::metric_table;

    /// Every metric the presentation names is one the model writes.
    #[test]
    fn every_named_metric_exists() {
        let classes = ["classify", "answer", "summary", "answer_fallback"];
        let table = metric_table(&classes, Some(1));
        let exists = |name: &str| table.iter().any(|m| m.def.name == name);
        for section in presentation(&classes, &[]).sections {
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
