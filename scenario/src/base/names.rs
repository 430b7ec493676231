//! The one way configuration reads and writes an enum by name: any
//! [`Named`](stampede_engine::kernel::Named) enum, whose list and names the engine
//! owns. Use with serde's `with`:
//!
//! ```ignore
//! #[serde(with = "crate::base::names")]            // one value
//! #[serde(with = "crate::base::names::list")]      // Vec<T>
//! #[serde(with = "crate::base::names::optional")]  // Option<T>
//! ```
//!
//! An unknown name is refused with serde's usual message, listing the names
//! allowed: ``unknown variant `x`, expected one of `a`, `b` ``.

use serde::{Deserialize, Deserializer, Serializer};
use stampede_engine::kernel::Named;

fn parse<'de, D: Deserializer<'de>, T: Named>(name: &str) -> Result<T, D::Error> {
    T::from_name(name).ok_or_else(|| serde::de::Error::unknown_variant(name, T::NAMES))
}

pub fn serialize<S: Serializer, T: Named>(value: &T, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(value.name())
}

pub fn deserialize<'de, D: Deserializer<'de>, T: Named>(deserializer: D) -> Result<T, D::Error> {
    let name = String::deserialize(deserializer)?;
    parse::<D, T>(&name)
}

/// A list of names.
pub mod list {
    use super::*;
    use serde::ser::SerializeSeq;

    pub fn serialize<S: Serializer, T: Named>(values: &[T], serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(values.len()))?;
        for value in values {
            seq.serialize_element(value.name())?;
        }
        seq.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>, T: Named>(deserializer: D) -> Result<Vec<T>, D::Error> {
        let names = Vec::<String>::deserialize(deserializer)?;
        names.iter().map(|name| parse::<D, T>(name)).collect()
    }
}

/// An optional name.
pub mod optional {
    use super::*;

    pub fn serialize<S: Serializer, T: Named>(value: &Option<T>, serializer: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(value) => serializer.serialize_str(value.name()),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>, T: Named>(deserializer: D) -> Result<Option<T>, D::Error> {
        match Option::<String>::deserialize(deserializer)? {
            Some(name) => parse::<D, T>(&name).map(Some),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};
    use stampede_engine::models::gateway::Gate;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Section {
        #[serde(with = "super")]
        one: Gate,
        #[serde(with = "super::list")]
        many: Vec<Gate>,
        #[serde(default, with = "super::optional", skip_serializing_if = "Option::is_none")]
        maybe: Option<Gate>,
    }

    #[test]
    fn names_round_trip_and_unknown_ones_list_the_allowed() {
        let section: Section = toml::from_str("one = \"breaker\"\nmany = [\"retry\", \"quota\"]").unwrap();
        assert_eq!(section, Section { one: Gate::Breaker, many: vec![Gate::Retry, Gate::Quota], maybe: None });
        let text = toml::to_string(&section).unwrap();
        assert_eq!(toml::from_str::<Section>(&text).unwrap(), section);
        let error = toml::from_str::<Section>("one = \"brakes\"\nmany = []").unwrap_err().to_string();
        assert!(error.contains("unknown variant `brakes`, expected one of `admission`, `bulkhead`"), "{error}");
    }
}
