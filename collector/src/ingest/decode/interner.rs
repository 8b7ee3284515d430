//! Service and span names interned, so a million stored spans share a handful of strings; the
//! interner also carries the carriers a receiver reads from captured headers.
//!
//! Enters: every name the decoders read. Leaves: shared `Arc<str>`s, cut to a sane length.

use foldhash::HashSet;
use std::sync::Arc;

use deadline_budget::carrier::Carriers;

use crate::batch::truncate;

/// Longest span or service name kept (bytes); longer names are cut at a char boundary.
pub(super) const MAX_NAME_BYTES: usize = 512;
/// The interner forgets everything past this many distinct strings, so hostile input
/// (a new name per span) cannot grow it without bound.
const MAX_INTERNED: usize = 65_536;

/// What a receiver keeps from one request to the next: service and span names interned (so a
/// million stored spans share a handful of strings), and the carriers to read from captured
/// headers (`--budget-header`).
#[derive(Debug, Default)]
pub struct Interner {
    strings: HashSet<Arc<str>>,
    carriers: Arc<Carriers>,
}

impl Interner {
    /// An interner whose decoder reads these carriers (a team's own first, then the built-in).
    pub fn with_carriers(carriers: Arc<Carriers>) -> Self {
        Interner {
            strings: HashSet::default(),
            carriers,
        }
    }

    /// The carriers read from captured headers.
    pub fn carriers(&self) -> &Arc<Carriers> {
        &self.carriers
    }

    /// The shared copy of `s` (cut to a sane length).
    pub fn intern(&mut self, s: &str) -> Arc<str> {
        let s = truncate(s, MAX_NAME_BYTES);
        if let Some(found) = self.strings.get(s) {
            return found.clone();
        }
        if self.strings.len() >= MAX_INTERNED {
            self.strings.clear();
        }
        let arc: Arc<str> = Arc::from(s);
        self.strings.insert(arc.clone());
        arc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interner_stays_bounded_under_ten_thousand_services_per_name() {
        let mut interner = Interner::default();
        for i in 0..(MAX_INTERNED + 10) {
            let _ = interner.intern(&format!("service-{i}"));
        }
        assert!(interner.strings.len() <= MAX_INTERNED);
        let a = interner.intern("orders");
        let b = interner.intern("orders");
        assert!(Arc::ptr_eq(&a, &b));
    }
}
