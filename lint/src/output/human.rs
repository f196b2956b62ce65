//! miette graphical reports: the source span labelled, related places, the help line.

use std::fmt;
use std::sync::Arc;

use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan, NamedSource, SourceCode};

use super::RenderOptions;
use crate::diagnostic::Diagnostic;
use crate::driver::LintRun;
use crate::registry::Severity;

struct Report<'a> {
    d: &'a Diagnostic,
    src: &'a NamedSource<Arc<str>>,
}

impl fmt::Debug for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.d.message)
    }
}

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.d.message)
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
        Some(Box::new(help))
    }

    fn source_code(&self) -> Option<&dyn SourceCode> {
        Some(self.src)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let text_len = self.src.inner().len();
        let clamp = |r: &std::ops::Range<usize>| {
            let start = r.start.min(text_len);
            let end = r.end.clamp(start, text_len);
            (start, end - start)
        };
        let mut labels = Vec::new();
        let (start, len) = clamp(&self.d.range);
        labels.push(LabeledSpan::new_primary_with_span(self.d.label.clone(), (start, len)));
        for (range, label) in &self.d.related {
            labels.push(LabeledSpan::new_with_span(Some(label.clone()), clamp(range)));
        }
        Some(Box::new(labels.into_iter()))
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
        let src = NamedSource::new(file.path.clone(), file.text.clone());
        for d in &file.diagnostics {
            let report = Report { d, src: &src };
            let mut one = String::new();
            if handler.render_report(&mut one, &report).is_err() {
                one = format!("{}:{}:{}: {} {}\n", d.path, d.start.line, d.start.column, d.code, d.message);
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
