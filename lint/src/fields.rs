//! What a device move does to the fields of a module: the one [`Fate`] both front ends give a
//! field (D004 and `devcheck inspect` ask it, so they always agree), and the report `devcheck
//! inspect` prints for each struct or class.

use serde::Serialize;

use crate::diagnostic::Diagnostic;

/// Where a field ends up when its module moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// The framework's move (`Module::to`, `to_device`, `VarStore::set_device`) carries it.
    Moves,
    /// It holds tensors the move does not reach.
    LeftBehind,
    /// candle has no module move: the tensor stays where its constructor put it.
    Stays,
    /// Holds no tensor: plain data, which a move has nothing to do with.
    Plain,
    /// The derive rejects this field (a compile error).
    Rejected,
    /// Not known from the source.
    Unknown,
}

impl Fate {
    pub fn as_str(self) -> &'static str {
        match self {
            Fate::Moves => "moves",
            Fate::LeftBehind => "left behind",
            Fate::Stays => "stays",
            Fate::Plain => "-",
            Fate::Rejected => "rejected",
            Fate::Unknown => "unknown",
        }
    }
}

/// One struct and what a device move does to it.
#[derive(Debug, Clone, Serialize)]
pub struct StructReport {
    pub path: String,
    pub line: usize,
    pub column: usize,
    /// `struct` (Rust) or `class` (Python).
    pub kind: &'static str,
    pub name: String,
    /// The API the struct is read with: `devcheck`, `burn`, `tch` or `candle`.
    pub api: &'static str,
    /// How the framework moves it, in words.
    pub mover: String,
    pub fields: Vec<FieldReport>,
    /// What the derive would reject, with its help.
    pub errors: Vec<String>,
    /// Lint findings in the struct and its impls.
    #[serde(serialize_with = "findings_json")]
    pub findings: Vec<Diagnostic>,
}

/// One field of a [`StructReport`].
#[derive(Debug, Clone, Serialize)]
pub struct FieldReport {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: String,
    pub class: String,
    /// `moves`, `left behind`, `stays` (candle), `rejected`, `unknown`, or `-` for plain data.
    pub fate: &'static str,
    pub saved: Option<bool>,
    pub note: Option<String>,
    pub line: usize,
}

impl StructReport {
    pub fn count(&self, fate: &str) -> usize {
        self.fields.iter().filter(|f| f.fate == fate).count()
    }
}

fn findings_json<S: serde::Serializer>(findings: &[Diagnostic], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(findings.len()))?;
    for d in findings {
        seq.serialize_element(&serde_json::json!({
            "code": d.code,
            "name": d.name,
            "severity": d.severity.as_str(),
            "message": d.message,
            "path": d.path,
            "line": d.start.line,
            "column": d.start.column,
            "end_line": d.end.line,
            "end_column": d.end.column,
            "help": d.help,
        }))?;
    }
    seq.end()
}
