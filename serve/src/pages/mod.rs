//! The app's pages, one module each: its HTML and its JSON API.

pub mod home;
pub mod results;
pub mod ring;

/// The navigation: (path, name), in order.
pub const PAGES: &[(&str, &str)] = &[("/ring", "Ring explorer"), ("/results", "Results")];
