//! Enums that own their list and their names, so that a configuration file, an
//! output column and the code agree on one spelling from one place.
//!
//! [`named_enum!`](crate::named_enum) declares a fieldless enum together with its
//! [`Named`] implementation: the list of variants in declaration order and each
//! variant's snake_case name. Configuration parses names through one generic helper
//! (`stampede_scenario::base::names`), and per-variant metrics are built by
//! iterating [`Named::ALL`] — never by literal index.

/// A fieldless enum with a fixed list of variants and a name for each.
pub trait Named: Copy + Eq + 'static {
    /// Every variant, in declaration order.
    const ALL: &'static [Self];
    /// Each variant's name, in [`Self::ALL`] order.
    const NAMES: &'static [&'static str];

    /// The variant's name as written in scenarios and output columns.
    fn name(self) -> &'static str {
        Self::NAMES[self.index()]
    }

    /// Position in [`Self::ALL`]: an index into per-variant arrays.
    fn index(self) -> usize {
        Self::ALL.iter().position(|&v| v == self).expect("ALL lists every variant")
    }

    /// The variant called `name`, if any.
    fn from_name(name: &str) -> Option<Self> {
        Self::NAMES.iter().position(|&n| n == name).map(|i| Self::ALL[i])
    }
}

/// Declares a fieldless enum and its [`Named`] implementation:
///
/// ```
/// stampede_kernel::named_enum! {
///     /// How a queue is served.
///     #[derive(Clone, Copy, Debug, PartialEq, Eq)]
///     pub enum Order {
///         /// Oldest first.
///         Fifo = "fifo",
///         Lifo = "lifo",
///     }
/// }
/// use stampede_kernel::names::Named;
/// assert_eq!(Order::Lifo.name(), "lifo");
/// assert_eq!(Order::from_name("fifo"), Some(Order::Fifo));
/// assert_eq!(Order::Lifo.index(), 1);
/// ```
///
/// Variants get implicit discriminants 0, 1, … so `variant as usize` equals its
/// index; [`Named::index`] is overridden with that cast.
#[macro_export]
macro_rules! named_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $( $(#[$vmeta])* $variant ),+
        }

        impl $crate::names::Named for $name {
            const ALL: &'static [Self] = &[$( $name::$variant ),+];
            const NAMES: &'static [&'static str] = &[$( $text ),+];

            #[inline]
            fn index(self) -> usize {
                self as usize
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::Named;

    crate::named_enum! {
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        enum Colour {
            Red = "red",
            /// A doc comment on a variant is kept.
            DarkBlue = "dark_blue",
        }
    }

    #[test]
    fn names_round_trip_in_declaration_order() {
        assert_eq!(Colour::ALL, &[Colour::Red, Colour::DarkBlue]);
        for &colour in Colour::ALL {
            assert_eq!(Colour::from_name(colour.name()), Some(colour));
            assert_eq!(Colour::ALL[colour.index()], colour);
        }
        assert_eq!(Colour::from_name("green"), None);
    }
}
