//! `devcheck inspect` for Rust files: every module struct read with the derive's own
//! classification (`devcheck-classify`) for devcheck, and with what the linter knows of those APIs
//! for burn, tch and candle ([`super::fields`]), with the lint findings in the struct and its
//! impls.

use std::ops::Range;

use syn::Item;

use super::FileCx;
use super::api::{self, Api};
use super::facts::Facts;
use super::fields::{FieldFate, burn_fields, devcheck_fields, plain_struct_fields};
use super::syntax::{is_cfg_test, mentions_tensor, type_name};
use crate::config::Settings;
use crate::diagnostic::LineIndex;
use crate::fields::{FieldReport, StructReport};
use crate::pipeline::FileReport;
use crate::source::ApiSet;

/// The module structs of a linted Rust file, parsed again on a stack deep enough for its tree (a
/// fresh segment only when this thread has too little left).
pub(crate) fn structs_in(report: &FileReport, settings: &Settings) -> std::io::Result<Vec<StructReport>> {
    // The file was linted, so its depth is within the limit.
    let depth = super::depth_of(&report.text).unwrap_or(super::depth::MAX_DEPTH);
    crate::stack::within(super::depth::stack_needed(depth), || read_structs(report, settings))
}

fn read_structs(report: &FileReport, settings: &Settings) -> Vec<StructReport> {
    let (text, kind, diagnostics) = (&*report.text, report.kind, &report.diagnostics[..]);
    let base = super::stripped_prefix(text);
    let Ok(ast) = syn::parse_file(&text[base..]) else {
        proc_macro2::extra::invalidate_current_thread_spans();
        return Vec::new();
    };
    let apis = settings.api.map(ApiSet::only).unwrap_or_else(|| api::detect(&ast, text));
    let file = FileCx { text, base, kind, apis, preview: false, backend: false };
    let facts = Facts::gather(&file, &ast.items);
    let mut found = Vec::new();
    collect(&ast.items, &mut found);
    let mut impls: Vec<(String, Range<usize>)> = Vec::new();
    impl_ranges(&file, &ast.items, &mut impls);
    let index = LineIndex::new(text);
    let shown = report.path.clone();
    let reports = found
        .into_iter()
        .filter_map(|s| {
            let (api, mover, fields) = read_struct(&file, s, &facts)?;
            let name = s.ident.to_string();
            let own = file.range(s.struct_token.span).start..struct_end(&file, s);
            let mut ranges = vec![own];
            ranges.extend(impls.iter().filter(|(n, _)| *n == name).map(|(_, r)| r.clone()));
            let findings = diagnostics
                .iter()
                .filter(|d| ranges.iter().any(|r| r.contains(&d.range.start)))
                .cloned()
                .collect();
            let at = index.line_col(text, file.range(s.ident.span()).start);
            let errors =
                fields.iter().flat_map(|f| f.errors.iter().map(|e| format!("`{}`: {e}", f.name))).collect();
            Some(StructReport {
                path: shown.clone(),
                line: at.line,
                column: at.column,
                kind: "struct",
                name,
                api: api.as_str(),
                mover,
                fields: fields
                    .into_iter()
                    .map(|f| FieldReport {
                        line: index.line_col(text, f.range.start).line,
                        name: f.name,
                        ty: f.ty,
                        class: f.class,
                        fate: f.fate.as_str(),
                        saved: f.saved,
                        note: f.note,
                    })
                    .collect(),
                errors,
                findings,
            })
        })
        .collect();
    proc_macro2::extra::invalidate_current_thread_spans();
    reports
}

fn struct_end(file: &FileCx<'_>, s: &syn::ItemStruct) -> usize {
    match &s.fields {
        syn::Fields::Named(f) => file.range(f.brace_token.span.join()).end,
        syn::Fields::Unnamed(f) => file.range(f.paren_token.span.join()).end,
        syn::Fields::Unit => file.range(s.ident.span()).end,
    }
}

/// Which API reads the struct, how it moves, and its fields; `None` for a struct holding no
/// module state.
fn read_struct(
    file: &FileCx<'_>,
    s: &syn::ItemStruct,
    facts: &Facts,
) -> Option<(Api, String, Vec<FieldFate>)> {
    let apis = file.apis;
    let module = devcheck_classify::has_module_derive(&s.attrs);
    let name = &s.ident;
    if module && apis.is(Api::Burn) {
        return Some((
            Api::Burn,
            format!("`{name}::to_device(&device)` (burn's `Module`)"),
            burn_fields(file, s),
        ));
    }
    if module && (apis.is(Api::Devcheck) || apis.is_empty()) {
        return Some((
            Api::Devcheck,
            format!("`{name}::to(&device)` (devcheck's `Module`)"),
            devcheck_fields(file, s),
        ));
    }
    if !s.fields.iter().any(|f| mentions_tensor(&f.ty) || is_tch_module(&f.ty)) {
        return None;
    }
    let facts = facts.structs.get(&name.to_string());
    if apis.is(Api::Tch) {
        let fields = plain_struct_fields(file, s, facts, Api::Tch);
        return Some((Api::Tch, "`VarStore::set_device(device)` (tch)".to_string(), fields));
    }
    if apis.is(Api::Candle) {
        let fields = plain_struct_fields(file, s, facts, Api::Candle);
        return Some((
            Api::Candle,
            "nothing (candle modules do not move: each tensor stays where its constructor made it)"
                .to_string(),
            fields,
        ));
    }
    None
}

fn is_tch_module(ty: &syn::Type) -> bool {
    let syn::Type::Path(p) = ty else { return false };
    p.path.segments.len() >= 2 && p.path.segments[0].ident == "nn"
}

fn collect<'a>(items: &'a [Item], out: &mut Vec<&'a syn::ItemStruct>) {
    for item in items {
        match item {
            Item::Struct(s) if !is_cfg_test(&s.attrs) => out.push(s),
            Item::Mod(m) if !is_cfg_test(&m.attrs) => {
                if let Some((_, items)) = &m.content {
                    collect(items, out);
                }
            }
            _ => {}
        }
    }
}

fn impl_ranges(file: &FileCx<'_>, items: &[Item], out: &mut Vec<(String, Range<usize>)>) {
    for item in items {
        match item {
            Item::Impl(imp) => {
                if let Some(name) = type_name(&imp.self_ty) {
                    let start = file.range(imp.impl_token.span).start;
                    let end = file.range(imp.brace_token.span.join()).end;
                    out.push((name, start..end));
                }
            }
            Item::Mod(m) => {
                if let Some((_, items)) = &m.content {
                    impl_ranges(file, items, out);
                }
            }
            _ => {}
        }
    }
}
