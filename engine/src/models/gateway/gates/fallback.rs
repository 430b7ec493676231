//! ⑦ Fallback: a failed call of a class with a fallback (serve flagged, raw query,
//! downgrade, batch queue…) is served its fallback instead of failing its turn. It
//! acts when the call ends, not on the way down.

use crate::models::gateway::model::Gateway;

impl Gateway<'_> {
    /// True if a failed call of `class` is served its fallback.
    pub(in crate::models::gateway) fn serves_fallback(&self, class: usize) -> bool {
        self.has_fallback_gate && self.p.classes[class].has_fallback
    }
}
