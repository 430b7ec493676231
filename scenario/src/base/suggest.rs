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

/// `; did you mean a, b?` for the names nearest to `wanted`, or, when none is near,
/// `; its N metrics are listed by …` (`listed_by`): never the whole list.
pub fn did_you_mean(wanted: &str, names: &[&str], listed_by: &str) -> String {
    let near = nearest(wanted, names, 8);
    if near.is_empty() {
        format!("; none of its {} names is close ({listed_by} lists them)", names.len())
    } else {
        format!("; did you mean {}?", near.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_few_closest_first() {
        let names = ["wait_mean_s", "response_mean_s", "utilization_ratio", "api.p99_s", "web.p99_s", "db.p99_s"];
        assert_eq!(nearest("wait_men_s", &names, 8), vec!["wait_mean_s"]);
        assert_eq!(nearest("p99_s", &names, 2), vec!["api.p99_s", "web.p99_s"]);
        assert!(nearest("zzzzzz", &names, 8).is_empty());
        let many: Vec<String> = (0..300).map(|i| format!("s{i}.p99_s")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(nearest("s17.p99", &many, 8).len(), 8, "at most the few asked for");
        assert!(did_you_mean("qqqq", &many, "`stampede show --metrics`").contains("none of its 300 names"));
    }
}
