//! Wrapped knob values: `num_workers=int(args.workers)`,
//! `max(1, args.workers)`, `min(args.workers, os.cpu_count())`,
//! `args.workers or 0`.
//!
//! Real scripts seldom pass a flag straight to the DataLoader; they coerce or
//! clamp it first. Such a wrapper is identity-like (`int`) or monotone
//! (`max`, `min` with a bound, `or` with a fallback), so the knob still
//! follows the flag, and [`super::knobs`] edits the flag's default (or the
//! command's argument) as if the call read it bare. What the knob then gets
//! is the wrapper applied to that value, and a value the wrapper would turn
//! into another (`max(1, ·)` of 0 is 1) is refused rather than written: the
//! turn would claim a setting the loader never sees. A bound that is no
//! literal (`os.cpu_count()`) cannot be checked here; the description says
//! the knob is capped by it, and the measurement records the count that ran.
//!
//! Pure functions of the syntax tree: [`peel`] finds the layers around the
//! wrapped expression, [`Wrapper::apply`] says what a value becomes.

use tree_sitter::Node;

use super::scan::{argument_nodes, named_children, text};

/// One layer around the wrapped value.
#[derive(Clone, Debug, PartialEq)]
pub enum Layer {
    /// `int(x)`: the same integer.
    Int,
    /// `max(c, x)` / `max(x, c)`: at least `c`.
    AtLeast(i64),
    /// `min(x, c)` with a literal `c`: at most `c`.
    AtMost(i64),
    /// `min(x, os.cpu_count())`: at most a value known only at run time.
    CappedBy(String),
    /// `x or c`: `c` when `x` is falsy (0, False, None).
    OrElse(String),
}

/// The layers around a wrapped value, innermost first, and the wrapper as
/// written with `·` for the wrapped expression: `max(1, int(·))`.
#[derive(serde::Serialize, Clone, Debug, PartialEq)]
pub struct Wrapper {
    #[serde(skip)]
    pub layers: Vec<Layer>,
    pub written: String,
}

/// What a value becomes through a wrapper.
#[derive(Clone, Debug, PartialEq)]
pub enum Applied {
    /// The knob gets this value, as Python source.
    Exactly(String),
    /// The knob gets this value, or less: a bound known only at run time.
    AtMost(String, String),
}

impl Applied {
    pub fn value(&self) -> &str {
        match self {
            Applied::Exactly(v) | Applied::AtMost(v, _) => v,
        }
    }
}

fn int_of(v: &str) -> Option<i64> {
    match v.trim() {
        "True" => Some(1),
        "False" | "None" => Some(0),
        t => t.replace('_', "").parse().ok(),
    }
}

fn falsy(v: &str) -> bool {
    matches!(v.trim(), "0" | "False" | "None" | "0.0" | "\"\"" | "''")
}

impl Wrapper {
    /// The value a knob gets when the wrapped expression is `value` (Python
    /// source of a literal); `None` when it cannot be told (not a number
    /// where a number is needed).
    pub fn apply(&self, value: &str) -> Option<Applied> {
        let mut v = value.trim().to_string();
        let mut cap: Option<String> = None;
        for layer in &self.layers {
            v = match layer {
                Layer::Int => int_of(&v)?.to_string(),
                Layer::AtLeast(c) => int_of(&v)?.max(*c).to_string(),
                Layer::AtMost(c) => int_of(&v)?.min(*c).to_string(),
                Layer::CappedBy(b) => {
                    cap = Some(b.clone());
                    v
                }
                Layer::OrElse(c) if falsy(&v) => c.clone(),
                Layer::OrElse(_) => v,
            };
        }
        Some(match cap {
            Some(b) => Applied::AtMost(v, b),
            None => Applied::Exactly(v),
        })
    }

    /// Why `value` cannot be written for this knob: the wrapper turns it into
    /// another value (`None`: it reaches the knob as it is, or is capped by a
    /// bound known only at run time).
    pub fn refuses(&self, knob: &str, value: &str) -> Option<String> {
        let Some(a) = self.apply(value) else {
            return Some(format!(
                "`{}` needs a number, and {value} is none",
                self.written
            ));
        };
        let same = match (int_of(a.value()), int_of(value)) {
            (Some(x), Some(y)) => x == y,
            _ => a.value() == value.trim(),
        };
        (!same).then(|| {
            format!(
                "`{}` turns {value} into {}, so {knob} cannot be {value} through it",
                self.written,
                a.value()
            )
        })
    }
}

/// `int(x)`, `max(c, x)`, `min(x, c)`, `x or c`, parenthesised or nested:
/// the wrapped expression and the layers around it (innermost first), when
/// `value` is such a wrapper around an expression `is_source` accepts (an
/// `args.x` chain, a local bound to one). `None` for anything else.
pub fn peel<'t>(
    value: Node<'t>,
    src: &str,
    is_source: &dyn Fn(Node<'t>) -> bool,
) -> Option<(Node<'t>, Wrapper)> {
    let (inner, layers, written) = peel_layers(value, src, is_source, 0)?;
    if layers.is_empty() {
        return None;
    }
    Some((inner, Wrapper { layers, written }))
}

fn literal_int(node: Node<'_>, src: &str) -> Option<i64> {
    match node.kind() {
        "integer" => int_of(text(node, src)),
        "unary_operator" => {
            let a = node.child_by_field_name("argument")?;
            (a.kind() == "integer" && text(node, src).starts_with('-'))
                .then(|| int_of(text(a, src)).map(|i| -i))?
        }
        _ => None,
    }
}

fn is_literal(node: Node<'_>) -> bool {
    matches!(
        node.kind(),
        "integer" | "float" | "true" | "false" | "none" | "string"
    )
}

type Peeled<'t> = (Node<'t>, Vec<Layer>, String);

fn peel_layers<'t>(
    node: Node<'t>,
    src: &str,
    is_source: &dyn Fn(Node<'t>) -> bool,
    depth: usize,
) -> Option<Peeled<'t>> {
    if depth > 8 {
        return None;
    }
    if is_source(node) {
        return Some((node, Vec::new(), "·".into()));
    }
    let inner = |n: Node<'t>| peel_layers(n, src, is_source, depth + 1);
    match node.kind() {
        "parenthesized_expression" => {
            let kids: Vec<Node<'t>> = named_children(node)
                .into_iter()
                .filter(|k| k.kind() != "comment")
                .collect();
            if kids.len() != 1 {
                return None;
            }
            let (n, layers, w) = inner(kids[0])?;
            Some((n, layers, format!("({w})")))
        }
        "boolean_operator" => {
            let op = node.child_by_field_name("operator")?;
            let (l, r) = (
                node.child_by_field_name("left")?,
                node.child_by_field_name("right")?,
            );
            if text(op, src) != "or" || !is_literal(r) {
                return None;
            }
            let (n, mut layers, w) = inner(l)?;
            let fallback = text(r, src).to_string();
            layers.push(Layer::OrElse(fallback.clone()));
            Some((n, layers, format!("{w} or {fallback}")))
        }
        "call" => {
            let f = node.child_by_field_name("function")?;
            if f.kind() != "identifier" {
                return None;
            }
            let name = text(f, src);
            let args = argument_nodes(node.child_by_field_name("arguments")?);
            if args
                .iter()
                .any(|a| a.kind() != "comment" && !is_expression(*a))
            {
                return None;
            }
            match (name, args.as_slice()) {
                ("int", [a]) => {
                    let (n, mut layers, w) = inner(*a)?;
                    layers.push(Layer::Int);
                    Some((n, layers, format!("int({w})")))
                }
                ("max" | "min", [a, b]) => {
                    // The wrapped side is the one that leads to the source;
                    // the other is the bound.
                    let (wrapped, bound, first) = match (inner(*a), inner(*b)) {
                        (Some(x), None) => (x, *b, true),
                        (None, Some(x)) => (x, *a, false),
                        _ => return None,
                    };
                    let (n, mut layers, w) = wrapped;
                    let bound_text = text(bound, src).to_string();
                    let layer = match (name, literal_int(bound, src)) {
                        ("max", Some(c)) => Layer::AtLeast(c),
                        ("min", Some(c)) => Layer::AtMost(c),
                        // A lower bound known only at run time could raise
                        // any value: no knob follows it.
                        ("max", None) => return None,
                        _ => Layer::CappedBy(bound_text.clone()),
                    };
                    layers.push(layer);
                    let written = if first {
                        format!("{name}({w}, {bound_text})")
                    } else {
                        format!("{name}({bound_text}, {w})")
                    };
                    Some((n, layers, written))
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// A plain positional argument (no `*x`, `**x`, keyword, generator).
fn is_expression(node: Node<'_>) -> bool {
    !matches!(
        node.kind(),
        "keyword_argument" | "list_splat" | "dictionary_splat" | "generator_expression"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edit::scan::parse_python;

    /// Peels the value of `x = <expr>`, with `args.<anything>` as the source.
    fn peeled(expr: &str) -> Option<(String, Wrapper)> {
        let src = format!("x = {expr}\n");
        let tree = parse_python(&src, "t.py").unwrap();
        let assign = named_children(named_children(tree.root_node())[0])[0];
        let value = assign.child_by_field_name("right").unwrap();
        let is_source = |n: Node<'_>| n.kind() == "attribute" && text(n, &src).starts_with("args.");
        peel(value, &src, &is_source).map(|(n, w)| (text(n, &src).to_string(), w))
    }

    #[test]
    fn int_is_the_same_value() {
        let (inner, w) = peeled("int(args.workers)").unwrap();
        assert_eq!(inner, "args.workers");
        assert_eq!(w.layers, vec![Layer::Int]);
        assert_eq!(w.written, "int(·)");
        assert_eq!(w.apply("8"), Some(Applied::Exactly("8".into())));
        assert_eq!(w.refuses("num_workers", "8"), None);
        assert_eq!(w.refuses("num_workers", "0"), None);
    }

    #[test]
    fn max_with_a_floor_refuses_what_it_raises() {
        for (expr, written) in [
            ("max(1, args.workers)", "max(1, ·)"),
            ("max(args.workers, 1)", "max(·, 1)"),
            ("max(1, int(args.workers))", "max(1, int(·))"),
        ] {
            let (inner, w) = peeled(expr).unwrap();
            assert_eq!(inner, "args.workers", "{expr}");
            assert_eq!(w.written, written);
            assert_eq!(w.apply("0"), Some(Applied::Exactly("1".into())));
            assert_eq!(w.apply("8").unwrap().value(), "8");
            assert_eq!(w.refuses("num_workers", "8"), None);
            let why = w.refuses("num_workers", "0").unwrap();
            assert!(why.contains("turns 0 into 1"), "{why}");
        }
        // Nested: int first, then the floor.
        let (_, w) = peeled("max(1, int(args.workers))").unwrap();
        assert_eq!(w.layers, vec![Layer::Int, Layer::AtLeast(1)]);
    }

    #[test]
    fn min_with_a_literal_or_a_runtime_bound() {
        let (_, w) = peeled("min(args.workers, 8)").unwrap();
        assert_eq!(w.apply("16").unwrap().value(), "8");
        assert!(w.refuses("num_workers", "16").unwrap().contains("into 8"));
        assert_eq!(w.refuses("num_workers", "4"), None);
        let (inner, w) = peeled("min(args.workers, os.cpu_count())").unwrap();
        assert_eq!(inner, "args.workers");
        assert_eq!(w.written, "min(·, os.cpu_count())");
        assert_eq!(
            w.apply("16"),
            Some(Applied::AtMost("16".into(), "os.cpu_count()".into()))
        );
        // Not known here: written, and the measurement shows what ran.
        assert_eq!(w.refuses("num_workers", "16"), None);
    }

    #[test]
    fn or_with_a_fallback() {
        let (_, w) = peeled("args.workers or 0").unwrap();
        assert_eq!(w.written, "· or 0");
        assert_eq!(w.apply("0").unwrap().value(), "0");
        assert_eq!(w.refuses("num_workers", "0"), None);
        let (_, w) = peeled("(args.workers or 4)").unwrap();
        assert_eq!(w.written, "(· or 4)");
        assert_eq!(w.apply("0").unwrap().value(), "4");
        assert!(w.refuses("num_workers", "0").is_some());
        assert_eq!(w.refuses("num_workers", "2"), None);
    }

    #[test]
    fn anything_else_is_no_wrapper() {
        for expr in [
            "args.workers",
            "args.workers // 2",
            "max(args.workers, args.other)",
            "max(args.workers, os.cpu_count())",
            "float(args.workers)",
            "int(args.workers, 10)",
            "args.workers or other",
            "args.workers and 4",
            "int(other)",
            "int(*args.workers)",
        ] {
            assert!(peeled(expr).is_none(), "{expr}");
        }
    }
}
