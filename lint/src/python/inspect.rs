//! `devcheck inspect model.py`: for each `nn.Module` subclass, what `model.to(device)` moves
//! (parameters, buffers, submodules, `nn.ModuleList`/`ModuleDict`/`ParameterList`) and what it
//! leaves behind (plain tensor attributes, modules and tensors in plain containers), with the
//! line that assigns each, from the same classification D004 reads ([`super::fields`]).

use ruff_python_ast::ModModule;
use ruff_python_parser::Parsed;
use ruff_text_size::Ranged;

use crate::diagnostic::LineIndex;
use crate::fields::{FieldReport, StructReport};
use crate::pipeline::FileReport;

use super::checker::Checker;
use super::fields::{Fate, Holds, module_fields, nothing_to_move};
use super::model::AttrHow;
use super::model::Model;
use super::project::{Project, View};
use super::typing::Truth;

/// The module classes of one Python file, with the lint findings inside each.
/// `Err` only when the tree needed more stack than the thread had and the system gave none.
pub(crate) fn classes_in(report: &FileReport, project: &Project) -> std::io::Result<Vec<StructReport>> {
    let Ok((parsed, depth)) = super::parse(&report.text, super::source_type(&report.disk_path)) else {
        return Ok(Vec::new());
    };
    let tree = std::cell::Cell::new(Some(parsed));
    let found = crate::stack::within(super::depth::stack_needed(depth), || {
        tree.take().map(|parsed| classes(report, project, parsed)).unwrap_or_default()
    });
    // No segment: the tree is still here, and may be too deep to drop on this stack.
    if let Some(parsed) = tree.take() {
        super::depth::dismantle(parsed.into_syntax().body);
    }
    found
}

/// [`classes_in`] on the parsed tree, which is dropped here.
fn classes(report: &FileReport, project: &Project, parsed: Parsed<ModModule>) -> Vec<StructReport> {
    let (text, kind, diagnostics) = (&*report.text, report.kind, &report.diagnostics[..]);
    let body = &parsed.syntax().body;
    let model = Model::build(text, body);
    if !model.imports_torch {
        return Vec::new();
    }
    let (module, is_package) = super::project::module_path(&report.disk_path);
    let cx = Checker::new(
        &model,
        kind,
        &report.disk_path,
        View::new(project, &report.disk_path, &module, is_package, Default::default()),
    );
    let index = LineIndex::new(text);
    let shown = report.path.clone();
    let line = |offset: usize| index.line_col(text, offset).line;
    let applied = super::project::applied_in(body);
    let moved_by_apply = |name: &str, class: &str| {
        super::project::moved_by(&applied, name, class) || cx.types.project().moved_by_apply(name, class)
    };
    let mut reports = Vec::new();
    for (class, c) in model.classes() {
        if cx.types.is_module_class(class) != Truth::Yes {
            continue;
        }
        // `.to()` and `.cuda()` go through `_apply`: a class that overrides it moves what it keeps.
        let own_move = ["_apply", "to", "cuda"].into_iter().find(|m| model.method(class, m).is_some());
        let at = index.line_col(text, c.def.name.start().to_usize());
        let span = c.def.range().to_std_range();
        let fields = module_fields(&cx, class)
            .into_iter()
            .map(|f| {
                let rehomed = cx.types.class_attrs(class, f.name).into_iter().find(|a| {
                    matches!(a.how, AttrHow::Assign | AttrHow::SetAttr)
                        && a.range != f.at
                        && cx.is_forward(a.method)
                });
                let mut fate = f.fate();
                let note = match (&f.holds, own_move) {
                    (_, Some(m)) if fate == Fate::LeftBehind => {
                        fate = Fate::Unknown;
                        Some(format!("the class overrides `{m}`, which may move it"))
                    }
                    (Holds::ModulesInPlain { .. }, _) if nothing_to_move(&cx, &f) => {
                        fate = Fate::Plain;
                        Some("they hold no tensor: a move has nothing of them to move".to_string())
                    }
                    (Holds::PlainTensor, _)
                        if fate == Fate::LeftBehind && moved_by_apply(f.name, c.def.name.as_str()) =>
                    {
                        fate = Fate::Unknown;
                        Some(format!("an `_apply` override of another module moves a `{}`", f.name))
                    }
                    (_, _) if rehomed.is_some() && fate == Fate::LeftBehind => {
                        let at = rehomed.map(|a| line(a.range.start().to_usize())).unwrap_or(0);
                        Some(format!("assigned again in the forward pass, line {at}"))
                    }
                    (Holds::ModulesInPlain { .. } | Holds::TensorsInPlain { .. }, _) => {
                        f.filled_at.map(|r| format!("filled at line {}", line(r.start().to_usize())))
                    }
                    (Holds::UnregisteredParameter, _) => {
                        Some("move or convert the data before wrapping it in `nn.Parameter`".to_string())
                    }
                    _ => None,
                };
                FieldReport {
                    name: f.name.to_string(),
                    ty: f.made_by(&cx),
                    class: f.class(),
                    fate: fate.as_str(),
                    saved: f.saved(),
                    note,
                    line: line(f.at.start().to_usize()),
                }
            })
            .collect();
        let name = c.def.name.as_str().to_string();
        reports.push(StructReport {
            path: shown.clone(),
            line: at.line,
            column: at.column,
            kind: "class",
            mover: format!("`{name}.to(device)` (nn.Module: its parameters, buffers and submodules)"),
            name,
            api: "torch",
            fields,
            errors: Vec::new(),
            findings: diagnostics.iter().filter(|d| span.contains(&d.range.start)).cloned().collect(),
        });
    }
    reports
}
