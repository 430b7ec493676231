//! "Did you mean": the few names nearest to one that is not known, instead of a list
//! of every name (a graph of 100 services has thousands of metrics).

/// Up to `most` of `names` nearest to `wanted`, closest first: those whose
/// Damerau–Levenshtein distance (strsim) is at most a third of the longer name, and
/// those that contain `wanted` or that `wanted` contains. Ties keep `names`' order.
pub fn nearest<'a>(wanted: &str, names: &[&'a str], most: usize) -> Vec<&'a str> {
    let mut scored: Vec<(usize, usize, &'a str)> = names
        .iter()
        .enumerate()
        .filter_map(|(order, &name)| {
            let distance = strsim::damerau_levenshtein(wanted, name);
            let close = distance * 3 <= wanted.chars().count().max(name.chars().count());
            let inside = !wanted.is_empty() && (name.contains(wanted) || wanted.contains(name));
            (close || inside).then_some((distance, order, name))
        })
        .collect();
    scored.sort_unstable();
    scored.into_iter().take(most).map(|(_, _, name)| name).collect()
}

/// The most names an error lists whole when none is near.
const LISTED_WHOLE: usize = 12;

/// `; did you mean a, b?` for the names nearest to `wanted`; when none is near, `; its
/// metrics: …` for a short list (`what` names them), else `; none of its N metrics is
/// close (LISTED_BY lists them)` — never a list of hundreds.
pub fn did_you_mean(wanted: &str, names: &[&str], what: &str, listed_by: &str) -> String {
    let near = nearest(wanted, names, 8);
    if !near.is_empty() {
        format!("; did you mean {}?", near.join(", "))
    } else if names.len() <= LISTED_WHOLE {
        format!("; its {what}: {}", names.join(", "))
    } else {
        format!("; none of its {} {what} is close ({listed_by} lists them)", names.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_few_closest_first() {
        let names = ["wait_mean_s", "response_mean_s", "utilization_ratio", "api.p99_s", "web.p99_s", "db.p99_s"];
        assert_eq!(nearest("wait_men_s", &names, 8), vec!["wait_mean_s"]);
        assert_eq!(nearest("p99_s", &names, 2), vec!["db.p99_s", "api.p99_s"], "closest first");
        assert!(nearest("zzzzzz", &names, 8).is_empty());
        let many: Vec<String> = (0..300).map(|i| format!("s{i}.p99_s")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(nearest("s17.p99", &many, 8).len(), 8, "at most the few asked for");
        assert!(did_you_mean("qqqq", &many, "metrics", "the manifest").contains("none of its 300 metrics is close"));
        assert_eq!(did_you_mean("qqqq", &names[..2], "metrics", "-"), "; its metrics: wait_mean_s, response_mean_s");
    }
}
