//! The one list of models. Adding a model is a module beside this file and one
//! line here; nothing else in the code base names a model.

use super::spec::{DynModel, Registered};
use super::{cluster, dependency, gateway, graph, mg1, mmc};

/// Every model, in listing order.
pub static MODELS: &[&dyn DynModel] = &[
    &Registered::<mmc::Mmc>::MODEL,
    &Registered::<mg1::Mg1>::MODEL,
    &Registered::<cluster::Cluster>::MODEL,
    &Registered::<dependency::Dependency>::MODEL,
    &Registered::<gateway::Gateway>::MODEL,
    &Registered::<graph::Graph>::MODEL,
];

/// The model called `name`.
pub fn model(name: &str) -> Option<&'static dyn DynModel> {
    MODELS.iter().copied().find(|m| m.name() == name)
}

/// Every model's name, description and sections, for the scenario layer (which
/// lists them when a file names no known model).
pub fn sections() -> Vec<(&'static str, &'static str, &'static [&'static str])> {
    MODELS.iter().map(|m| (m.name(), m.description(), m.sections())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_sections_do_not_clash_with_the_top_level() {
        let mut names: Vec<&str> = MODELS.iter().map(|m| m.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), MODELS.len());
        for model in MODELS {
            assert!(!model.description().is_empty(), "{}", model.name());
            for section in model.sections() {
                assert!(!["name", "description", "model", "run", "grid", "verify", "optimize"].contains(section));
            }
        }
    }
}
