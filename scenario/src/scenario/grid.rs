//! A grid as the pipeline sees it: its axes (a case axis's values are labelled
//! patches), optionally the combinations it lists (`[grid] points`), the point at an
//! index (row-major: the first axis varies slowest), and the point with given values.

use super::overrides::GridAxis;

/// The grid axis whose values are labelled patches of several sections:
/// `case = [{ label = "naive", stack = { client = "naive" } }, { label = "brownout", incidents = [...] }]`.
pub const CASE_AXIS: &str = "case";

/// `[grid] points`: per grid point, an index into each axis's values.
pub type Combinations = Vec<Vec<u32>>;

/// A grid as axes and, optionally, the combinations it lists (`[grid] points`).
#[derive(Clone, Copy)]
pub struct GridView<'a> {
    pub axes: &'a [GridAxis],
    pub points: Option<&'a Combinations>,
}

/// A point's wanted axis values: (path, value), a case by its label (a string).
pub type Wanted = Vec<(String, toml::Value)>;

/// Where a claim's point is in a grid.
#[derive(Debug, PartialEq)]
pub enum Found {
    At(u32),
    Nowhere,
    /// This many points match.
    Several(usize),
}

impl GridView<'_> {
    pub fn point_count(&self) -> usize {
        match self.points {
            Some(points) => points.len(),
            None => self.axes.iter().map(|axis| axis.values.len()).product(),
        }
    }

    /// Grid point `index`'s index into each axis's values (row-major: the first axis
    /// varies slowest).
    pub fn choice(&self, index: usize) -> Vec<usize> {
        match self.points {
            Some(points) => points[index].iter().map(|&i| i as usize).collect(),
            None => {
                let mut choice = vec![0; self.axes.len()];
                let mut rest = index;
                for (slot, axis) in choice.iter_mut().zip(self.axes).rev() {
                    *slot = rest % axis.values.len();
                    rest /= axis.values.len();
                }
                choice
            }
        }
    }

    /// Point `index`'s axis values, a case by its label.
    pub fn values(&self, index: usize) -> Wanted {
        self.axes
            .iter()
            .zip(self.choice(index))
            .map(|(axis, i)| (axis.path.clone(), shown(&axis.path, &axis.values[i])))
            .collect()
    }

    /// The point whose values on the axes `wanted` names are those (axes it does not
    /// name are free).
    pub fn find(&self, wanted: &[(String, toml::Value)]) -> Found {
        let allowed: Vec<Vec<bool>> = self
            .axes
            .iter()
            .map(|axis| match wanted.iter().find(|(path, _)| *path == axis.path) {
                None => vec![true; axis.values.len()],
                Some((_, value)) => axis.values.iter().map(|v| same(&shown(&axis.path, v), value)).collect(),
            })
            .collect();
        let fits = |choice: &[usize]| choice.iter().zip(&allowed).all(|(&i, ok)| ok[i]);
        match self.points {
            Some(points) => {
                let matching: Vec<usize> = (0..points.len()).filter(|&p| fits(&self.choice(p))).collect();
                match matching.as_slice() {
                    [] => Found::Nowhere,
                    [one] => Found::At(*one as u32),
                    many => Found::Several(many.len()),
                }
            }
            None => {
                let counts: Vec<usize> = allowed.iter().map(|ok| ok.iter().filter(|&&b| b).count()).collect();
                let total = counts.iter().try_fold(1usize, |acc, &n| acc.checked_mul(n)).unwrap_or(usize::MAX);
                match total {
                    0 => Found::Nowhere,
                    1 => {
                        let index = allowed.iter().zip(self.axes).fold(0usize, |index, (ok, axis)| {
                            index * axis.values.len() + ok.iter().position(|&b| b).expect("one allowed")
                        });
                        Found::At(index as u32)
                    }
                    n => Found::Several(n),
                }
            }
        }
    }
}

/// An axis value as a claim compares it: a case by its label.
pub(crate) fn shown(path: &str, value: &toml::Value) -> toml::Value {
    match value.get("label") {
        Some(label) if path == CASE_AXIS => label.clone(),
        _ => value.clone(),
    }
}

/// Equal values, numbers by value (`2` is `2.0`).
fn same(a: &toml::Value, b: &toml::Value) -> bool {
    let number = |v: &toml::Value| v.as_float().or_else(|| v.as_integer().map(|i| i as f64));
    match (number(a), number(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}
