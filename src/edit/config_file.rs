//! Values in the config files a training script loads (YAML, JSON, TOML):
//! finding the value at a key path and changing that one value in place.
//!
//! These are not full parsers. They find a *scalar* at a key path in the
//! common layouts (block mappings in YAML, tables and dotted keys in TOML,
//! objects in JSON) and edit only that scalar's bytes, so the file's
//! formatting, key order and comments stay as the user wrote them. A value
//! they cannot find is reported as not found, never guessed.

use std::ops::Range;

use thiserror::Error;

/// Why a value cannot be written into a config file ([`set_value`],
/// [`config_literal`]): the file's own type, so that the caller that
/// edits a knob wraps it with the file's name.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigValueError {
    /// `path` is the dotted key path.
    #[error("no value at `{path}` in the config file")]
    NotFound { path: String },
    #[error("TOML has no null: remove the key instead of setting None")]
    TomlNull,
}

/// The config formats tuneloop reads knob values from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigKind {
    Yaml,
    Json,
    Toml,
}

impl ConfigKind {
    /// The kind of a file, from its extension.
    pub fn of(path: &str) -> Option<ConfigKind> {
        let lower = path.to_ascii_lowercase();
        if lower.ends_with(".yaml") || lower.ends_with(".yml") {
            Some(ConfigKind::Yaml)
        } else if lower.ends_with(".json") {
            Some(ConfigKind::Json)
        } else if lower.ends_with(".toml") {
            Some(ConfigKind::Toml)
        } else {
            None
        }
    }
}

/// A scalar found at a key path.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigValue {
    /// 1-based line of the value.
    pub line: usize,
    /// Byte range of the value's text.
    pub range: Range<usize>,
    /// The value as written in the file (`0`, `true`, `"x"`).
    pub text: String,
}

/// The scalar at `path` (`["data", "num_workers"]`), if the file has one.
pub fn lookup(kind: ConfigKind, src: &str, path: &[String]) -> Option<ConfigValue> {
    if path.is_empty() {
        return None;
    }
    let range = match kind {
        ConfigKind::Yaml => yaml_lookup(src, path)?,
        ConfigKind::Toml => toml_lookup(src, path)?,
        ConfigKind::Json => json_lookup(src, path)?,
    };
    Some(ConfigValue {
        line: src[..range.start].matches('\n').count() + 1,
        text: src[range.clone()].to_string(),
        range,
    })
}

/// `src` with the scalar at `path` set to `python_value` (Python source text
/// such as `4` or `True`, written in the file's own spelling).
pub fn set_value(
    kind: ConfigKind,
    src: &str,
    path: &[String],
    python_value: &str,
) -> Result<String, ConfigValueError> {
    let found = lookup(kind, src, path).ok_or_else(|| ConfigValueError::NotFound {
        path: path.join("."),
    })?;
    let literal = config_literal(kind, python_value)?;
    let mut out = String::with_capacity(src.len() + literal.len());
    out.push_str(&src[..found.range.start]);
    out.push_str(&literal);
    out.push_str(&src[found.range.end..]);
    Ok(out)
}

/// A config scalar written as Python would (`true` → `True`, `null` → `None`).
pub fn python_value(text: &str) -> String {
    match text.trim() {
        "true" | "True" | "yes" | "on" => "True".into(),
        "false" | "False" | "no" | "off" => "False".into(),
        "null" | "~" | "None" => "None".into(),
        other => other.to_string(),
    }
}

/// A Python literal in a config file's spelling.
pub fn config_literal(kind: ConfigKind, python: &str) -> Result<String, ConfigValueError> {
    let v = python.trim();
    Ok(match v {
        "True" => "true".into(),
        "False" => "false".into(),
        "None" => match kind {
            ConfigKind::Toml => return Err(ConfigValueError::TomlNull),
            ConfigKind::Yaml | ConfigKind::Json => "null".into(),
        },
        _ => v.to_string(),
    })
}

/// Where a trailing ` # comment` starts in a line, quotes respected.
fn comment_start(line: &str) -> usize {
    let mut quote: Option<char> = None;
    let mut prev = ' ';
    for (i, c) in line.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == '#' && (prev == ' ' || prev == '\t' || i == 0) => return i,
            None => {}
        }
        prev = c;
    }
    line.len()
}

/// The lines of `src` with their start offsets (terminators excluded).
fn lines(src: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut pos = 0;
    for l in src.split_inclusive('\n') {
        let body = l.trim_end_matches('\n').trim_end_matches('\r');
        out.push((pos, body));
        pos += l.len();
    }
    out
}

fn unquote(key: &str) -> &str {
    let k = key.trim();
    for q in ['"', '\''] {
        if k.len() >= 2 && k.starts_with(q) && k.ends_with(q) {
            return &k[1..k.len() - 1];
        }
    }
    k
}

/// The trimmed byte range of `line[from..to]`, offset by `base`.
fn trimmed(line: &str, base: usize, from: usize, to: usize) -> Option<Range<usize>> {
    let seg = &line[from..to];
    let lead = seg.len() - seg.trim_start().len();
    let body = seg.trim();
    (!body.is_empty()).then(|| base + from + lead..base + from + lead + body.len())
}

/// Block-mapping YAML: `key:` lines nested by indentation.
fn yaml_lookup(src: &str, path: &[String]) -> Option<Range<usize>> {
    let mut depth = 0;
    let mut parent_indent: Option<usize> = None;
    let mut child_indent: Option<usize> = None;
    for (start, line) in lines(src) {
        let content = line.trim_start();
        if content.is_empty() || content.starts_with('#') || content.starts_with("---") {
            continue;
        }
        let indent = line.len() - content.len();
        if parent_indent.is_some_and(|p| indent <= p) {
            // Left the mapping the next key had to be in.
            return None;
        }
        let level = *child_indent.get_or_insert(indent);
        if indent != level {
            continue;
        }
        let Some(colon) = yaml_key_colon(content) else {
            continue;
        };
        if unquote(&content[..colon]) != path[depth] {
            continue;
        }
        let value_from = indent + colon + 1;
        if depth + 1 == path.len() {
            let end = indent + comment_start(content);
            return trimmed(line, start, value_from, end.max(value_from));
        }
        depth += 1;
        parent_indent = Some(indent);
        child_indent = None;
    }
    None
}

/// The `:` that ends a YAML key (followed by a blank or the line's end).
fn yaml_key_colon(content: &str) -> Option<usize> {
    let bytes = content.as_bytes();
    let mut quote: Option<u8> = None;
    for (i, &b) in bytes.iter().enumerate() {
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if b == b'"' || b == b'\'' => quote = Some(b),
            None if b == b':' && (i + 1 == bytes.len() || bytes[i + 1] == b' ') => return Some(i),
            None if b == b'#' => return None,
            None => {}
        }
    }
    None
}

/// TOML: `[table]` headers and (dotted) `key = value` lines.
fn toml_lookup(src: &str, path: &[String]) -> Option<Range<usize>> {
    let mut table: Vec<String> = Vec::new();
    for (start, line) in lines(src) {
        let content = line.trim_start();
        let indent = line.len() - content.len();
        if content.starts_with("[[") {
            // Arrays of tables are not key paths a script reads as `cfg.a.b`.
            table = vec!["\u{0}".into()];
            continue;
        }
        if let Some(rest) = content.strip_prefix('[') {
            let header = &rest[..rest.find(']')?];
            table = header.split('.').map(|k| unquote(k).to_string()).collect();
            continue;
        }
        let Some(eq) = content.find('=') else {
            continue;
        };
        let mut full = table.clone();
        full.extend(content[..eq].split('.').map(|k| unquote(k).to_string()));
        if full == path {
            let end = indent + comment_start(content);
            return trimmed(line, start, indent + eq + 1, end.max(indent + eq + 1));
        }
    }
    None
}

/// JSON: a small scanner that follows object keys down `path`.
fn json_lookup(src: &str, path: &[String]) -> Option<Range<usize>> {
    let mut p = JsonScan {
        b: src.as_bytes(),
        i: 0,
    };
    p.ws();
    p.find(path)
}

struct JsonScan<'b> {
    b: &'b [u8],
    i: usize,
}

impl JsonScan<'_> {
    fn ws(&mut self) {
        while self.i < self.b.len() && self.b[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    /// At a value: the range of the scalar at `path` below it.
    fn find(&mut self, path: &[String]) -> Option<Range<usize>> {
        if path.is_empty() {
            let start = self.i;
            self.skip_value()?;
            let is_scalar = !matches!(self.b[start], b'{' | b'[');
            return is_scalar.then_some(start..self.i);
        }
        if self.b.get(self.i) != Some(&b'{') {
            return None;
        }
        self.i += 1;
        loop {
            self.ws();
            match self.b.get(self.i)? {
                b'}' => return None,
                b',' => {
                    self.i += 1;
                    continue;
                }
                b'"' => {}
                _ => return None,
            }
            let key_start = self.i + 1;
            self.skip_string()?;
            let key = std::str::from_utf8(&self.b[key_start..self.i - 1]).ok()?;
            self.ws();
            if self.b.get(self.i) != Some(&b':') {
                return None;
            }
            self.i += 1;
            self.ws();
            if key == path[0] {
                return self.find(&path[1..]);
            }
            self.skip_value()?;
        }
    }

    fn skip_string(&mut self) -> Option<()> {
        self.i += 1;
        while self.i < self.b.len() {
            match self.b[self.i] {
                b'\\' => self.i += 2,
                b'"' => {
                    self.i += 1;
                    return Some(());
                }
                _ => self.i += 1,
            }
        }
        None
    }

    fn skip_value(&mut self) -> Option<()> {
        match *self.b.get(self.i)? {
            b'"' => self.skip_string(),
            b'{' | b'[' => {
                let mut depth = 0usize;
                while self.i < self.b.len() {
                    match self.b[self.i] {
                        b'"' => {
                            self.skip_string()?;
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                self.i += 1;
                                return Some(());
                            }
                        }
                        _ => {}
                    }
                    self.i += 1;
                }
                None
            }
            _ => {
                let start = self.i;
                while self.i < self.b.len()
                    && !matches!(self.b[self.i], b',' | b'}' | b']')
                    && !self.b[self.i].is_ascii_whitespace()
                {
                    self.i += 1;
                }
                (self.i > start).then_some(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Vec<String> {
        s.split('.').map(str::to_string).collect()
    }

    const YAML: &str = "# training config\nmodel:\n  width: 64\n  num_workers: 9  # not the loader's\ndata:\n  root: ./items   # where the files are\n  batch_size: 32\n  num_workers: 0  # raise on big machines\n  pin_memory: false\nepochs: 3\n";

    #[test]
    fn yaml_finds_nested_scalars_and_edits_only_the_value() {
        let v = lookup(ConfigKind::Yaml, YAML, &p("data.num_workers")).unwrap();
        assert_eq!((v.line, v.text.as_str()), (8, "0"));
        assert_eq!(
            lookup(ConfigKind::Yaml, YAML, &p("model.num_workers"))
                .unwrap()
                .text,
            "9"
        );
        assert_eq!(
            lookup(ConfigKind::Yaml, YAML, &p("epochs")).unwrap().text,
            "3"
        );
        assert!(lookup(ConfigKind::Yaml, YAML, &p("data")).is_none());
        assert!(lookup(ConfigKind::Yaml, YAML, &p("data.width")).is_none());
        assert!(lookup(ConfigKind::Yaml, YAML, &p("num_workers")).is_none());
        let out = set_value(ConfigKind::Yaml, YAML, &p("data.num_workers"), "4").unwrap();
        assert_eq!(
            out,
            YAML.replace("num_workers: 0  # raise", "num_workers: 4  # raise")
        );
        let out = set_value(ConfigKind::Yaml, YAML, &p("data.pin_memory"), "True").unwrap();
        assert!(out.contains("  pin_memory: true\n"));
        let missing = set_value(ConfigKind::Yaml, YAML, &p("data.prefetch_factor"), "4");
        assert_eq!(
            missing.unwrap_err().to_string(),
            "no value at `data.prefetch_factor` in the config file"
        );
    }

    #[test]
    fn toml_tables_and_dotted_keys() {
        let src = "title = \"run\"\n\n[data]\nbatch_size = 32\nnum_workers = 2 # cores\n\n[train.loader]\npin_memory = false\n";
        let v = lookup(ConfigKind::Toml, src, &p("data.num_workers")).unwrap();
        assert_eq!((v.line, v.text.as_str()), (5, "2"));
        assert_eq!(
            lookup(ConfigKind::Toml, src, &p("train.loader.pin_memory"))
                .unwrap()
                .text,
            "false"
        );
        let out = set_value(ConfigKind::Toml, src, &p("data.num_workers"), "8").unwrap();
        assert_eq!(
            out,
            src.replace("num_workers = 2 # cores", "num_workers = 8 # cores")
        );
        assert_eq!(
            set_value(ConfigKind::Toml, src, &p("data.num_workers"), "None"),
            Err(ConfigValueError::TomlNull)
        );
        assert_eq!(
            ConfigValueError::TomlNull.to_string(),
            "TOML has no null: remove the key instead of setting None"
        );
        let dotted = "data.num_workers = 1\n";
        assert_eq!(
            lookup(ConfigKind::Toml, dotted, &p("data.num_workers"))
                .unwrap()
                .text,
            "1"
        );
    }

    #[test]
    fn json_follows_keys_and_keeps_the_layout() {
        let src = "{\n  \"name\": \"a,b}\",\n  \"model\": {\"num_workers\": 7},\n  \"data\": {\n    \"list\": [1, {\"x\": 2}],\n    \"num_workers\": 0,\n    \"pin_memory\": false\n  }\n}\n";
        let v = lookup(ConfigKind::Json, src, &p("data.num_workers")).unwrap();
        assert_eq!((v.line, v.text.as_str()), (6, "0"));
        assert_eq!(
            lookup(ConfigKind::Json, src, &p("model.num_workers"))
                .unwrap()
                .text,
            "7"
        );
        assert!(lookup(ConfigKind::Json, src, &p("data.list")).is_none());
        let out = set_value(ConfigKind::Json, src, &p("data.pin_memory"), "True").unwrap();
        assert_eq!(
            out,
            src.replace("\"pin_memory\": false", "\"pin_memory\": true")
        );
    }

    #[test]
    fn spellings() {
        assert_eq!(python_value("true"), "True");
        assert_eq!(python_value(" null "), "None");
        assert_eq!(python_value("4"), "4");
        assert_eq!(ConfigKind::of("configs/train.YML"), Some(ConfigKind::Yaml));
        assert_eq!(ConfigKind::of("train.py"), None);
    }
}
