//! Text made safe inside HTML: the one escape every page stampede writes uses (the
//! report, the compare and fit pages, and the web app's pages).

/// `text` safe inside an HTML element or a double-quoted attribute: `&`, `<`, `>` and
/// `"` become entities (and `&` first, so no entity is escaped twice).
pub fn escape_html(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    #[test]
    fn markup_and_quotes_become_entities_once() {
        assert_eq!(super::escape_html(r#"<a href="x">&amp;</a>"#), "&lt;a href=&quot;x&quot;&gt;&amp;amp;&lt;/a&gt;");
    }
}
