//! miette graphical reports: the source span labelled, related places, the help line.
//!
//! miette is handed an [`Excerpt`] of the file rather than the file: the lines the report shows,
//! with control characters escaped ([`super::printable`]) and lines longer than
//! [`MAX_SHOWN_LINE`] characters cut to a window around the labels on them. A generated file's
//! one long line then reads as a short one, and columns past 65,535 (where miette's underlines
//! overflow the formatter's width) never reach miette.

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;

use miette::{
    GraphicalReportHandler, GraphicalTheme, LabeledSpan, MietteError, MietteSpanContents, SourceCode,
    SourceSpan, SpanContents,
};

use super::RenderOptions;
use super::printable::{escaped, needs_escape, printable, printable_line};
use crate::diagnostic::{Diagnostic, LineIndex};
use crate::driver::LintRun;
use crate::pipeline::FileReport;
use crate::registry::Severity;

/// Longer lines are shown as a window of this many characters around their labels.
const MAX_SHOWN_LINE: usize = 200;

/// How many characters of a cut line are shown before its first label.
const SHOWN_BEFORE_LABEL: usize = 60;

struct Report<'a> {
    d: &'a Diagnostic,
    excerpt: Excerpt,
}

impl fmt::Debug for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&printable(&self.d.message))?;
        f.write_str(&self.d.repeats())
    }
}

impl std::error::Error for Report<'_> {}

impl miette::Diagnostic for Report<'_> {
    fn code<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        Some(Box::new(format!("{} {}", self.d.code, self.d.name)))
    }

    fn severity(&self) -> Option<miette::Severity> {
        Some(match self.d.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
        })
    }

    fn help<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        let mut help = self.d.help.clone()?;
        if let Some(fix) = &self.d.fix {
            let how = match fix.applicability {
                crate::Applicability::Safe => "`--fix`",
                crate::Applicability::Unsafe => "`--fix --unsafe-fixes`",
                crate::Applicability::DisplayOnly => "hand",
            };
            help.push_str(&format!("\nfix ({how}): {}", fix.message));
        }
        Some(Box::new(printable(&help).into_owned()))
    }

    fn source_code(&self) -> Option<&dyn SourceCode> {
        Some(&self.excerpt)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        Some(Box::new(self.excerpt.labels.iter().cloned()))
    }
}

pub(super) fn render(run: &LintRun, opts: RenderOptions) -> String {
    let theme = if opts.color { GraphicalTheme::unicode() } else { GraphicalTheme::unicode_nocolor() };
    let handler = GraphicalReportHandler::new_themed(theme).with_links(false).with_width(opts.width);
    let mut out = String::new();
    for file in &run.files {
        if file.diagnostics.is_empty() {
            continue;
        }
        let index = LineIndex::new(&file.text);
        for d in &file.diagnostics {
            let report = Report { d, excerpt: Excerpt::new(file, &index, d) };
            let mut one = String::new();
            if handler.render_report(&mut one, &report).is_err() {
                one =
                    format!("{}: {} {}\n", printable_line(&d.location()), d.code, printable_line(&d.message));
            }
            out.push_str(&one);
            if !one.ends_with('\n') {
                out.push('\n');
            }
            out.push('\n');
        }
    }
    out
}

/// The lines of a file one report shows, made safe to print, with its labels moved onto them.
struct Excerpt {
    name: String,
    /// Line `first_line` (0-based) of the file and the lines after it, each printable and at most
    /// about [`MAX_SHOWN_LINE`] characters.
    text: String,
    first_line: usize,
    labels: Vec<LabeledSpan>,
    /// The file's own 0-based column of each label start (by offset in `text`), for the
    /// `path:line:column` miette writes.
    columns: HashMap<usize, usize>,
}

impl Excerpt {
    fn new(file: &FileReport, index: &LineIndex, d: &Diagnostic) -> Excerpt {
        let text = &*file.text;
        let mut spans: Vec<(Range<usize>, Option<String>, bool)> =
            vec![(clamp(text, &d.range), d.label.clone(), true)];
        spans.extend(d.related.iter().map(|(r, label)| (clamp(text, r), Some(label.clone()), false)));
        let line_of = |offset: usize| index.line_col(text, offset).line;
        let last_line = index.line_count();
        // The labels' lines and one line either side; miette may show any line between them.
        // Not before the finding's notebook cell (nor its boundary line).
        let floor = d.cell.map_or(1, |c| c.first_line);
        let first =
            spans.iter().map(|(r, _, _)| line_of(r.start)).min().unwrap_or(1).saturating_sub(1).max(floor);
        let last =
            spans.iter().map(|(r, _, _)| line_of(r.end)).max().unwrap_or(1).saturating_add(1).min(last_line);
        // Not past the finding's notebook cell either (the next cell's boundary line).
        let last = match d.cell {
            Some(_) => (first..=last)
                .find(|&l| {
                    l > first
                        && text[index.line_range(text, l)].starts_with(crate::python::notebook::BOUNDARY)
                })
                .map_or(last, |l| l - 1),
            None => last,
        };
        let mut points: Vec<usize> = spans.iter().flat_map(|(r, _, _)| [r.start, r.end]).collect();
        points.sort_unstable();
        points.dedup();
        let mut out = String::new();
        let mut moved: HashMap<usize, usize> = HashMap::new();
        for line in first..=last {
            let range = index.line_range(text, line);
            let on_line: Vec<usize> = points.iter().copied().filter(|&p| line_of(p) == line).collect();
            show_line(text, range, &on_line, &mut out, &mut moved);
            // The line's break, as in the file (miette reads the lines after a span up to one).
            if line < last_line {
                out.push('\n');
            }
        }
        let at = |p: usize| moved.get(&p).copied().unwrap_or(0);
        let mut labels = Vec::new();
        let mut columns = HashMap::new();
        for (r, label, primary) in spans {
            let (start, end) = (at(r.start), at(r.end).max(at(r.start)));
            let label = label.map(|l| printable_line(&l).into_owned());
            let span = (start, end - start);
            labels.push(if primary {
                LabeledSpan::new_primary_with_span(label, span)
            } else {
                LabeledSpan::new_with_span(label, span)
            });
            columns.insert(start, index.line_col(text, r.start).column.saturating_sub(1));
        }
        // In a notebook, the cell and its lines.
        let (name, first_line) = match d.cell {
            Some(cell) => (format!("{}:cell {}", file.path, cell.number), d.shown_line(first) - 1),
            None => (file.path.clone(), first - 1),
        };
        Excerpt { name: printable_line(&name).into_owned(), text: out, first_line, labels, columns }
    }
}

/// Writes one line of the file, or a window of it around `points` if it is long, to `out`, and
/// records where each of `points` (offsets on this line) lands in `out`.
fn show_line(
    text: &str,
    line: Range<usize>,
    points: &[usize],
    out: &mut String,
    moved: &mut HashMap<usize, usize>,
) {
    let whole = &text[line.clone()];
    let count = whole.chars().count();
    // The window, in characters of the line.
    let (from, to) = if count <= MAX_SHOWN_LINE {
        (0, count)
    } else {
        let anchor = points.first().map(|&p| text[line.start..p.clamp(line.start, line.end)].chars().count());
        let from = anchor.unwrap_or(0).saturating_sub(SHOWN_BEFORE_LABEL).min(count - MAX_SHOWN_LINE);
        (from, from + MAX_SHOWN_LINE)
    };
    let byte_at = |n: usize| whole.char_indices().nth(n).map(|(i, _)| line.start + i).unwrap_or(line.end);
    let (window_start, window_end) = (byte_at(from), byte_at(to));
    if from > 0 {
        out.push('…');
    }
    // Points before the window are shown at its start, points after it at its end.
    for &p in points.iter().filter(|&&p| p <= window_start) {
        moved.insert(p, out.len());
    }
    for (i, c) in text[window_start..window_end].char_indices() {
        if let Some(&p) = points.iter().find(|&&p| p == window_start + i) {
            moved.insert(p, out.len());
        }
        if needs_escape(c, true) {
            out.push_str(&escaped(c));
        } else {
            out.push(c);
        }
    }
    for &p in points.iter().filter(|&&p| p >= window_end) {
        moved.insert(p, out.len());
    }
    if to < count {
        out.push('…');
    }
}

/// A range inside the text, on character boundaries.
fn clamp(text: &str, r: &Range<usize>) -> Range<usize> {
    let floor = |mut i: usize| {
        i = i.min(text.len());
        while !text.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    let start = floor(r.start);
    start..floor(r.end).max(start)
}

impl SourceCode for Excerpt {
    fn read_span<'a>(
        &'a self,
        span: &SourceSpan,
        context_lines_before: usize,
        context_lines_after: usize,
    ) -> Result<Box<dyn SpanContents<'a> + 'a>, MietteError> {
        let inner = self.text.as_str().read_span(span, context_lines_before, context_lines_after)?;
        let column = self.columns.get(&span.offset()).copied().unwrap_or(inner.column());
        // miette's `line_count` counts lines from the start of the source, not of the span: keep
        // it counting from the file's first line, so snippets merge as they would for the file.
        Ok(Box::new(MietteSpanContents::new_named(
            self.name.clone(),
            inner.data(),
            *inner.span(),
            inner.line() + self.first_line,
            column,
            inner.line_count() + self.first_line,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Settings, lint_source};

    fn render_one(path: &str, text: &str) -> String {
        let report = lint_source(path, text, &Settings::with_preview());
        assert!(!report.diagnostics.is_empty(), "expected a finding");
        let run = LintRun::from(vec![report]);
        render(&run, RenderOptions { color: false, width: 100, summary: false })
    }

    const MODEL: &str = "use candle_core::{Device, Tensor};\n\
        fn forward(xs: &Tensor) -> candle_core::Result<Tensor> {\n";

    #[test]
    fn a_finding_far_along_a_long_line_is_shown_in_a_window() {
        let text = format!(
            "{MODEL}{}Tensor::zeros(3, candle_core::DType::F32, &Device::Cpu)?.add(xs)\n}}\n",
            " ".repeat(70_000)
        );
        let out = render_one("src/model.rs", &text);
        assert!(out.contains("[src/model.rs:3:70001]"), "{out}");
        assert!(out.contains("…") && out.contains("Tensor::zeros(3"), "{out}");
        assert!(out.lines().all(|l| l.chars().count() < 400), "a line was not cut:\n{out}");
    }

    #[test]
    fn control_characters_of_the_source_are_escaped() {
        let text = format!(
            "{MODEL}    // \u{1b}]0;pwned\u{7}\u{1b}[31m\0\n    Tensor::zeros(3, candle_core::DType::F32, &Device::Cpu)?.add(xs) // \u{1b}[2J\n}}\n"
        );
        let out = render_one("src/model.rs", &text);
        assert!(!out.contains('\u{1b}') && !out.contains('\u{7}') && !out.contains('\0'), "{out:?}");
        assert!(out.contains("\\u{1b}[2J"), "{out}");
        // The label still points at the call, after the escapes on the line.
        assert!(out.contains("[src/model.rs:4:5]"), "{out}");
    }
}
