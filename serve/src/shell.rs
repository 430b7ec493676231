//! The page shell every page shares: document head, the header with the navigation
//! built from [`PAGES`], and the shared stylesheet. Below every page: it imports none.

/// The navigation: (path, name), in order.
pub const PAGES: &[(&str, &str)] =
    &[("/learn", "Learn"), ("/sandbox", "Sandbox"), ("/ring", "Ring explorer"), ("/results", "Results")];

const STYLE: &str = include_str!("../assets/shell.css");

pub use stampede_output::markup::escape_html as escape;

/// A full page: `title`, the page's own `head` (styles) and `body`; `current` is the
/// navigation path to mark.
pub fn page(title: &str, current: &str, head: &str, body: &str) -> String {
    let nav: String = PAGES
        .iter()
        .map(|(path, name)| {
            let here = if *path == current { " aria-current=\"page\"" } else { "" };
            format!("<a href=\"{path}\"{here}>{name}</a>")
        })
        .collect();
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'self'; style-src 'self' 'unsafe-inline'; \
         script-src 'self' 'unsafe-inline'; img-src 'self' data:\">\
         <title>{} · stampede</title><style>{STYLE}</style>{head}</head>\n<body><header class=\"shell\">\
         <a class=\"brand\" href=\"/\">stampede</a><nav>{nav}</nav></header>\n<main>{body}</main></body></html>\n",
        escape(title)
    )
}
