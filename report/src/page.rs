//! The HTML page: header, contents, sections, with the stylesheet and the little
//! script inlined. A Content-Security-Policy forbids every network request, so the
//! page provably works offline from disk; the script only switches heatmap metrics,
//! offers each plot's CSV as a download and counts the plots it finds.

use crate::blocks::{escape, Block, PointInfo, Section};
use crate::chart::{hex, Figure};
use crate::folder::Folder;

const STYLE: &str = include_str!("page.css");
const SCRIPT: &str = include_str!("page.js");

/// A shell word, quoted when it needs to be.
pub fn shell_word(word: &str) -> String {
    if !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c)) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// The command that reproduces the run, as the user would type it.
pub fn command(folder: &Folder) -> String {
    let words = &folder.manifest.command_line;
    let mut out = vec!["stampede".to_string()];
    out.extend(words.iter().skip(1).map(|w| shell_word(w)));
    if words.is_empty() {
        return format!("stampede run {}", shell_word(&folder.manifest.scenario));
    }
    out.join(" ")
}

/// Days since 1970-01-01 as (year, month, day): Howard Hinnant's `civil_from_days`.
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

/// When the manifest was written, in UTC.
fn written_at(folder: &Folder) -> String {
    let Ok(modified) = std::fs::metadata(folder.dir.join("manifest.json")).and_then(|m| m.modified()) else {
        return "unknown".into();
    };
    let Ok(since) = modified.duration_since(std::time::UNIX_EPOCH) else { return "unknown".into() };
    let secs = since.as_secs() as i64;
    let (y, m, d) = civil(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02} UTC", s / 3600, s % 3600 / 60)
}

fn figure(html: &mut String, figure: &Figure, id: &str) {
    html.push_str(&format!(
        "<figure class=\"plot\" id=\"{id}\" data-plot=\"{}\" data-points=\"{}\"><figcaption>{}</figcaption>\n{}\n",
        figure.kind,
        figure.points,
        escape(&figure.title),
        figure.svg
    ));
    if !figure.legend.is_empty() {
        html.push_str("<ul class=\"legend\">");
        for (label, colour) in &figure.legend {
            html.push_str(&format!(
                "<li><span class=\"swatch\" style=\"background:{}\"></span>{}</li>",
                hex(*colour),
                escape(label)
            ));
        }
        html.push_str("</ul>");
    }
    if !figure.note.is_empty() {
        html.push_str(&format!("<p class=\"note\">{}</p>", escape(&figure.note)));
    }
    html.push_str(&format!(
        "<details class=\"data\"><summary>Data</summary><a class=\"csv\" href=\"#{id}\" data-csv=\"{id}-csv\" \
         download=\"{id}.csv\">Download CSV</a><pre id=\"{id}-csv\">{}</pre></details></figure>\n",
        escape(&figure.csv)
    ));
}

fn blocks(html: &mut String, list: &[Block], prefix: &str) {
    for (b, block) in list.iter().enumerate() {
        let id = format!("{prefix}-{b}");
        match block {
            Block::Figure(f) => figure(html, f, &id),
            Block::Multiples(figures) => {
                html.push_str("<div class=\"multiples\">");
                for (i, f) in figures.iter().enumerate() {
                    figure(html, f, &format!("{id}-{i}"));
                }
                html.push_str("</div>");
            }
            Block::Html(text) => html.push_str(text),
            Block::Choice { label, options } => {
                html.push_str(&format!("<div class=\"choice\"><label>{} <select data-choice=\"{id}\">", escape(label)));
                for (o, (name, _)) in options.iter().enumerate() {
                    html.push_str(&format!("<option value=\"{o}\">{}</option>", escape(name)));
                }
                html.push_str("</select></label>");
                for (o, (_, figures)) in options.iter().enumerate() {
                    html.push_str(&format!(
                        "<div class=\"option multiples\" data-option=\"{id}\" data-index=\"{o}\"{}>",
                        if o == 0 { "" } else { " hidden" }
                    ));
                    for (i, f) in figures.iter().enumerate() {
                        figure(html, f, &format!("{id}-{o}-{i}"));
                    }
                    html.push_str("</div>");
                }
                html.push_str("</div>");
            }
            Block::Details { summary, blocks: inner } => {
                html.push_str(&format!("<details class=\"more\"><summary>{}</summary>", escape(summary)));
                blocks(html, inner, &id);
                html.push_str("</details>");
            }
        }
    }
}

fn header(html: &mut String, folder: &Folder, points: &[PointInfo]) {
    let m = &folder.manifest;
    let description = folder.scenario.as_ref().map(|s| s.description.clone()).unwrap_or_default();
    html.push_str(&format!(
        "<header><h1>{}</h1><p class=\"lead\">{}</p><dl class=\"facts\">",
        escape(&m.scenario),
        escape(&description)
    ));
    let axes = if m.axes.is_empty() { "none".to_string() } else { m.axes.join(" × ") };
    let mut facts = vec![
        ("model", m.model.clone()),
        ("seed", m.seed.clone()),
        ("replicas", replicas_fact(folder)),
        ("grid", format!("{} point(s); axes: {axes}", m.grid_points)),
        (
            "run",
            format!(
                "{} s on {} thread(s), written {}",
                crate::chart::short(m.wall_time_s),
                m.threads,
                written_at(folder)
            ),
        ),
        ("version", format!("stampede {}", m.version)),
    ];
    if let Some(precision) = &m.precision {
        facts.insert(3, ("precision", precision.clone()));
    }
    if let Some(warmup) = &m.warmup {
        facts.insert(3, ("warm-up", warmup.clone()));
    }
    for (name, value) in facts {
        html.push_str(&format!("<dt>{name}</dt><dd>{}</dd>", escape(&value)));
    }
    html.push_str(&format!(
        "<dt>reproduce</dt><dd><code class=\"command\">{}</code></dd></dl>",
        escape(&command(folder))
    ));
    if let Err(why) = &folder.scenario {
        html.push_str(&format!(
            "<p class=\"warning\">The scenario recorded in manifest.json could not be resolved by this version ({}), so \
             metric directions, fault windows and model-specific plots are not shown.</p>",
            escape(why)
        ));
    }
    if points.len() > 1 {
        html.push_str("<details class=\"points\" open><summary>Grid points</summary><table class=\"points\"><tbody>");
        for p in points {
            let params = p.params.iter().map(|(k, v)| format!("{k} = {v}")).collect::<Vec<_>>().join(", ");
            // A point named only by its number is not numbered twice.
            let number = if p.label == format!("#{}", p.index) { String::new() } else { format!("#{}", p.index) };
            html.push_str(&format!(
                "<tr><th><span class=\"swatch\" style=\"background:{}\"></span>{}</th><td>{number}</td><td><code>{}</code></td></tr>",
                hex(p.colour),
                escape(&p.label),
                escape(&params)
            ));
        }
        html.push_str("</tbody></table></details>");
    }
    html.push_str("</header>");
}

/// The whole page.
/// "100 per grid point", or the range when points have their own counts (`optimize`).
fn replicas_fact(folder: &Folder) -> String {
    let counts = folder.summary.numbers("replicas").unwrap_or_default();
    let (low, high) = counts.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &c| (lo.min(c), hi.max(c)));
    if counts.is_empty() || low == high {
        return format!("{} per grid point", folder.manifest.replicas);
    }
    format!("{low} to {high} per grid point (each its own count: an optimize race)")
}

pub fn render(folder: &Folder, points: &[PointInfo], sections: &[Section]) -> String {
    let mut html = String::with_capacity(1 << 20);
    html.push_str(&format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; \
         script-src 'unsafe-inline'; img-src data:\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"stampede {}\">\n<title>{} · stampede report</title>\n<style>{STYLE}</style></head>\n\
         <body data-report=\"stampede\">\n",
        env!("CARGO_PKG_VERSION"),
        escape(&folder.manifest.scenario)
    ));
    header(&mut html, folder, points);
    html.push_str("<nav><ul>");
    for section in sections {
        html.push_str(&format!("<li><a href=\"#{}\">{}</a></li>", section.id, escape(&section.title)));
    }
    html.push_str("</ul></nav><main>");
    for section in sections {
        html.push_str(&format!(
            "<section id=\"{}\"><h2>{}</h2><p class=\"intro\">{}</p>",
            section.id,
            escape(&section.title),
            escape(&section.intro)
        ));
        blocks(&mut html, &section.blocks, &section.id);
        html.push_str("</section>\n");
    }
    html.push_str(&format!(
        "</main><footer>Written by stampede {} from {}. Every plot's data is under its “Data” fold; the full tables \
         are the Parquet files beside this page.</footer>\n<script>{SCRIPT}</script></body></html>\n",
        env!("CARGO_PKG_VERSION"),
        escape(&folder.shown.display().to_string())
    ));
    html
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_shell_words() {
        assert_eq!(civil(0), (1970, 1, 1));
        assert_eq!(civil(20_000), (2024, 10, 4));
        assert_eq!(civil(-1), (1969, 12, 31));
        assert_eq!(shell_word("baltor"), "baltor");
        assert_eq!(shell_word("retry=[{policy=\"naive\"}]"), "'retry=[{policy=\"naive\"}]'");
        assert_eq!(shell_word("it's"), "'it'\\''s'");
    }
}
