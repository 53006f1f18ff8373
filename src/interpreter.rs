//! Which Python runs the project: discovery in the order a user expects, and
//! the one-line probe of that interpreter's torch.
//!
//! Order (first that applies wins):
//! 1. `TUNELOOP_PYTHON`, when set and not empty (it overrides the file, as it always has);
//! 2. `[project] python` in `tuneloop.toml` (`~` expanded);
//! 3. the active virtualenv: `$VIRTUAL_ENV/bin/python`;
//! 4. the active conda environment: `$CONDA_PREFIX/bin/python`;
//! 5. the environment tuneloop was installed into: the `python` next to the
//!    running binary (`pip install tuneloop` puts it in `<venv>/bin/`);
//! 6. `python3` on `PATH`.
//!
//! Before all of these, a command-mode command that names its interpreter by
//! path (`[bench] run = ["/venv/bin/python", "train.py"]`) runs that one, so
//! that is the one announced and probed ([`of_command`]).
//!
//! Rules 3–5 apply only when that file exists, so a stale `VIRTUAL_ENV` or a
//! binary built by cargo (no python beside it) falls through to the next rule.
//! [`discover`] reads nothing from the process: the environment comes in as a
//! [`DiscoveryEnv`], so the order is unit-tested without touching globals.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::process::{self, Interrupt, Spec};

/// Why this interpreter was chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    TuneloopPython,
    ProjectPython,
    VirtualEnv,
    CondaPrefix,
    BesideBinary,
    PathPython3,
    /// The head of `[bench] run`, a path to a Python.
    CommandHead,
}

impl Rule {
    /// The rule in words, for `bench`, `start` and `doctor`.
    pub fn describe(self) -> &'static str {
        match self {
            Rule::TuneloopPython => "TUNELOOP_PYTHON is set",
            Rule::ProjectPython => "[project] python in tuneloop.toml",
            Rule::VirtualEnv => "the active virtualenv ($VIRTUAL_ENV)",
            Rule::CondaPrefix => "the active conda environment ($CONDA_PREFIX)",
            Rule::BesideBinary => "the environment tuneloop is installed in",
            Rule::PathPython3 => "python3 on PATH",
            Rule::CommandHead => "the head of [bench] run",
        }
    }
}

/// The chosen interpreter: what to run, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Interpreter {
    /// A path, or a bare name the spawn resolves on `PATH` (`python3` when
    /// PATH has none: the spawn's error then says so).
    pub program: String,
    pub rule: Rule,
}

/// What discovery reads from the environment, passed in (tests build their own).
#[derive(Clone, Debug, Default)]
pub struct DiscoveryEnv {
    pub tuneloop_python: Option<String>,
    pub virtual_env: Option<String>,
    pub conda_prefix: Option<String>,
    /// The running binary (`std::env::current_exe`, symlinks resolved).
    pub current_exe: Option<PathBuf>,
    /// `PATH`, for rule 6.
    pub path: Option<String>,
    pub home: Option<String>,
}

impl DiscoveryEnv {
    pub fn from_process() -> DiscoveryEnv {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        DiscoveryEnv {
            tuneloop_python: var("TUNELOOP_PYTHON"),
            virtual_env: var("VIRTUAL_ENV"),
            conda_prefix: var("CONDA_PREFIX"),
            current_exe: std::env::current_exe().ok(),
            path: var("PATH"),
            home: var("HOME"),
        }
    }
}

/// Whether a command's word means "the Python interpreter" (`python`,
/// `python3`, `python3.12`), as a bare name or the last part of a path.
pub fn names_python(word: &str) -> bool {
    let w = Path::new(word)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(word);
    w == "python"
        || w == "python3"
        || w.strip_prefix("python3.")
            .is_some_and(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit()))
}

/// The interpreter a command runs when its head is a path to a Python
/// (`/venv/bin/python train.py`; a relative one is the project's, `root`):
/// that one runs whatever discovery would pick. A bare `python` is
/// discovery's to resolve, so none.
pub fn of_command(words: &[String], root: &Path) -> Option<Interpreter> {
    let head = words.first()?;
    if !head.contains('/') || !names_python(head) {
        return None;
    }
    Some(Interpreter {
        program: root.join(head).display().to_string(),
        rule: Rule::CommandHead,
    })
}

/// Picks the interpreter; `is_file` says whether a candidate path exists
/// (the real one is [`Path::is_file`]).
pub fn discover(
    project_python: Option<&str>,
    env: &DiscoveryEnv,
    is_file: &dyn Fn(&Path) -> bool,
) -> Interpreter {
    let pick = |program: String, rule: Rule| Interpreter { program, rule };
    if let Some(p) = env.tuneloop_python.as_deref().filter(|p| !p.is_empty()) {
        return pick(p.to_string(), Rule::TuneloopPython);
    }
    if let Some(p) = project_python.filter(|p| !p.is_empty()) {
        return pick(expand_home(p, env.home.as_deref()), Rule::ProjectPython);
    }
    let in_bin = |prefix: &str| {
        let p = Path::new(prefix).join("bin").join("python");
        is_file(&p).then(|| p.display().to_string())
    };
    if let Some(p) = env.virtual_env.as_deref().and_then(in_bin) {
        return pick(p, Rule::VirtualEnv);
    }
    if let Some(p) = env.conda_prefix.as_deref().and_then(in_bin) {
        return pick(p, Rule::CondaPrefix);
    }
    if let Some(dir) = env.current_exe.as_deref().and_then(Path::parent) {
        for name in ["python", "python3"] {
            let p = dir.join(name);
            if is_file(&p) {
                return pick(p.display().to_string(), Rule::BesideBinary);
            }
        }
    }
    let on_path = env
        .path
        .as_deref()
        .unwrap_or("")
        .split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join("python3"))
        .find(|p| is_file(p));
    pick(
        on_path
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "python3".into()),
        Rule::PathPython3,
    )
}

fn expand_home(p: &str, home: Option<&str>) -> String {
    match (p.strip_prefix("~/"), home) {
        (Some(rest), Some(h)) => format!("{h}/{rest}"),
        _ => p.to_string(),
    }
}

/// What the interpreter says about its torch.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TorchInfo {
    /// `sys.version`'s first word, e.g. `3.11.7`.
    pub python_version: Option<String>,
    /// `None` when torch cannot be imported.
    pub torch_version: Option<String>,
    pub cuda_available: bool,
    /// The CUDA version torch was built with (`torch.version.cuda`).
    pub cuda_version: Option<String>,
    pub device_count: u32,
    /// Why the probe gave nothing (the interpreter did not start, the import failed).
    pub error: Option<String>,
    /// Whether torch was imported and asked for its devices ([`probe_torch`]);
    /// not by [`probe_torch_version`], which reads its version file only.
    #[serde(skip)]
    pub devices_known: bool,
}

/// One line of Python: the interpreter's version and its torch's, as JSON.
const PROBE_PY: &str = "import json, sys\nout = {'python': sys.version.split()[0]}\ntry:\n    import torch\n    out['torch'] = torch.__version__\n    out['cuda_version'] = torch.version.cuda\n    out['cuda'] = bool(torch.cuda.is_available())\n    out['devices'] = torch.cuda.device_count() if out['cuda'] else 0\nexcept Exception as e:\n    out['error'] = '%s: %s' % (type(e).__name__, e)\nprint('TUNELOOP_PROBE ' + json.dumps(out))\n";

/// Importing torch takes seconds; a broken CUDA set-up can take much longer.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(120);

/// Where torch is and its version file, without importing it (tens of
/// milliseconds where the import takes seconds): what `start` and `bench`
/// announce before their runs, which import torch anyway and show the
/// device it found.
const PROBE_VERSION_PY: &str = "import json, os, runpy, sys, importlib.util\nout = {'python': sys.version.split()[0]}\ntry:\n    spec = importlib.util.find_spec('torch')\n    if spec is None or spec.origin is None:\n        raise ModuleNotFoundError(\"No module named 'torch'\")\n    v = runpy.run_path(os.path.join(os.path.dirname(spec.origin), 'version.py'))\n    out['torch'] = v['__version__']\n    out['cuda_version'] = v.get('cuda')\nexcept Exception as e:\n    out['error'] = '%s: %s' % (type(e).__name__, e)\nprint('TUNELOOP_PROBE ' + json.dumps(out))\n";

/// Runs the interpreter once to import its torch and ask for its devices
/// (no training code runs): `doctor`'s check.
pub async fn probe_torch(python: &str, cwd: &Path, interrupt: &Interrupt) -> TorchInfo {
    run_probe(python, cwd, interrupt, PROBE_PY).await
}

/// Runs the interpreter once to find its torch and read its version,
/// without importing it: torch's devices stay unknown.
pub async fn probe_torch_version(python: &str, cwd: &Path, interrupt: &Interrupt) -> TorchInfo {
    run_probe(python, cwd, interrupt, PROBE_VERSION_PY).await
}

async fn run_probe(python: &str, cwd: &Path, interrupt: &Interrupt, code: &str) -> TorchInfo {
    let spec = Spec {
        program: python.to_string(),
        args: vec!["-c".into(), code.into()],
        cwd: cwd.to_owned(),
        timeout: PROBE_TIMEOUT,
        ..Spec::default()
    };
    match process::run(&spec, interrupt, |_| {}).await {
        Err(e) => TorchInfo {
            error: Some(format!("cannot run {python}: {e}")),
            ..TorchInfo::default()
        },
        Ok(out) => parse_probe(&out.stdout).unwrap_or_else(|| TorchInfo {
            error: Some(format!(
                "{python} gave no answer ({:?}): {}",
                out.ending,
                last_line(&out.stderr)
            )),
            ..TorchInfo::default()
        }),
    }
}

fn last_line(s: &str) -> &str {
    s.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("")
}

/// Reads the probe's line out of the interpreter's stdout.
pub fn parse_probe(stdout: &str) -> Option<TorchInfo> {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("TUNELOOP_PROBE "))?;
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    let s = |k: &str| v[k].as_str().map(str::to_string);
    Some(TorchInfo {
        python_version: s("python"),
        torch_version: s("torch"),
        cuda_available: v["cuda"].as_bool().unwrap_or(false),
        cuda_version: s("cuda_version"),
        device_count: v["devices"].as_u64().unwrap_or(0) as u32,
        error: s("error"),
        devices_known: !v["cuda"].is_null(),
    })
}

impl TorchInfo {
    /// `torch 2.13.0 (CPU)`, `torch 2.13.0 (CUDA 13.0, 2 devices)`, `torch
    /// 2.13.0+cu130` (its devices not asked), or why there is none.
    pub fn summary(&self) -> String {
        match &self.torch_version {
            None => format!(
                "no torch ({})",
                self.error.as_deref().unwrap_or("import failed")
            ),
            Some(v) if !self.devices_known => format!("torch {v}"),
            Some(v) if self.cuda_available => format!(
                "torch {v} (CUDA {}, {} device{})",
                self.cuda_version.as_deref().unwrap_or("?"),
                self.device_count,
                if self.device_count == 1 { "" } else { "s" }
            ),
            Some(v) => format!("torch {v} (CPU)"),
        }
    }
}

/// The line `bench` and `start` print before they measure.
pub fn announce(i: &Interpreter, t: &TorchInfo) -> String {
    format!(
        "python: {} ({}), {}",
        i.program,
        i.rule.describe(),
        t.summary()
    )
}

/// How to get an interpreter with torch, for the rule that chose this one.
pub fn fix_missing_torch(i: &Interpreter) -> String {
    let pin =
        "or pin one with `python = \"/path/to/venv/bin/python\"` under [project] in tuneloop.toml";
    match i.rule {
        Rule::TuneloopPython => format!(
            "TUNELOOP_PYTHON points at {}: install torch there (`{} -m pip install torch`), or unset TUNELOOP_PYTHON",
            i.program, i.program
        ),
        Rule::ProjectPython => format!(
            "[project] python is {}: install torch there (`{} -m pip install torch`), or fix the path in tuneloop.toml",
            i.program, i.program
        ),
        Rule::CommandHead => format!(
            "[bench] run starts {}: install torch there (`{} -m pip install torch`), or change the command's interpreter in tuneloop.toml",
            i.program, i.program
        ),
        _ => format!(
            "activate the virtualenv or conda environment that has torch (`source .venv/bin/activate`), or install it into this one (`{} -m pip install torch`), {pin}",
            i.program
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// A file system holding exactly these files.
    fn fs(files: &[&str]) -> impl Fn(&Path) -> bool {
        let set: BTreeSet<PathBuf> = files.iter().map(PathBuf::from).collect();
        move |p: &Path| set.contains(p)
    }

    fn env() -> DiscoveryEnv {
        DiscoveryEnv {
            tuneloop_python: Some("/opt/tl/python".into()),
            virtual_env: Some("/venv".into()),
            conda_prefix: Some("/conda".into()),
            current_exe: Some("/tool/bin/tuneloop".into()),
            path: Some("/usr/local/bin:/usr/bin".into()),
            home: Some("/home/u".into()),
        }
    }

    const ALL: &[&str] = &[
        "/venv/bin/python",
        "/conda/bin/python",
        "/tool/bin/python",
        "/usr/bin/python3",
    ];

    #[test]
    fn each_rule_applies_only_when_the_ones_before_it_do_not() {
        let files = fs(ALL);
        let mut e = env();
        let got = |e: &DiscoveryEnv, proj: Option<&str>| discover(proj, e, &files);
        assert_eq!(
            got(&e, Some("~/py/bin/python")),
            Interpreter {
                program: "/opt/tl/python".into(),
                rule: Rule::TuneloopPython
            }
        );
        e.tuneloop_python = None;
        assert_eq!(
            got(&e, Some("~/py/bin/python")),
            Interpreter {
                program: "/home/u/py/bin/python".into(),
                rule: Rule::ProjectPython
            }
        );
        assert_eq!(
            got(&e, None),
            Interpreter {
                program: "/venv/bin/python".into(),
                rule: Rule::VirtualEnv
            }
        );
        e.virtual_env = None;
        assert_eq!(
            got(&e, None),
            Interpreter {
                program: "/conda/bin/python".into(),
                rule: Rule::CondaPrefix
            }
        );
        e.conda_prefix = None;
        assert_eq!(
            got(&e, None),
            Interpreter {
                program: "/tool/bin/python".into(),
                rule: Rule::BesideBinary
            }
        );
        e.current_exe = None;
        assert_eq!(
            got(&e, None),
            Interpreter {
                program: "/usr/bin/python3".into(),
                rule: Rule::PathPython3
            }
        );
    }

    #[test]
    fn a_stale_environment_falls_through_to_the_next_rule() {
        // VIRTUAL_ENV names a deleted venv; conda's python is missing too; a
        // cargo-built binary has no python beside it.
        let files = fs(&["/usr/bin/python3"]);
        let i = discover(None, &env_without_override(), &files);
        assert_eq!(i.rule, Rule::PathPython3);
        assert_eq!(i.program, "/usr/bin/python3");
    }

    #[test]
    fn empty_settings_count_as_unset() {
        let mut e = env();
        e.tuneloop_python = Some(String::new());
        let i = discover(Some(""), &e, &fs(ALL));
        assert_eq!(i.rule, Rule::VirtualEnv);
    }

    #[test]
    fn python3_beside_the_binary_when_there_is_no_python() {
        let mut e = env_without_override();
        e.virtual_env = None;
        e.conda_prefix = None;
        let i = discover(None, &e, &fs(&["/tool/bin/python3", "/usr/bin/python3"]));
        assert_eq!(i.program, "/tool/bin/python3");
        assert_eq!(i.rule, Rule::BesideBinary);
    }

    #[test]
    fn no_python3_anywhere_leaves_the_bare_name_for_the_spawn_to_report() {
        let i = discover(None, &DiscoveryEnv::default(), &fs(&[]));
        assert_eq!(i.program, "python3");
        assert_eq!(i.rule, Rule::PathPython3);
    }

    fn env_without_override() -> DiscoveryEnv {
        DiscoveryEnv {
            tuneloop_python: None,
            ..env()
        }
    }

    #[test]
    fn the_probe_line_is_read_among_other_output() {
        let t = parse_probe("warning: something\nTUNELOOP_PROBE {\"python\": \"3.11.7\", \"torch\": \"2.13.0+cu130\", \"cuda_version\": \"13.0\", \"cuda\": true, \"devices\": 2}\n").unwrap();
        assert_eq!(t.torch_version.as_deref(), Some("2.13.0+cu130"));
        assert!(t.cuda_available);
        assert_eq!(t.device_count, 2);
        assert_eq!(t.summary(), "torch 2.13.0+cu130 (CUDA 13.0, 2 devices)");
        let none = parse_probe(
            "TUNELOOP_PROBE {\"python\": \"3.12.1\", \"error\": \"ModuleNotFoundError: No module named 'torch'\"}",
        )
        .unwrap();
        assert_eq!(none.torch_version, None);
        assert!(none.summary().contains("No module named 'torch'"));
        assert!(parse_probe("Traceback ...").is_none());
    }

    #[test]
    fn the_version_probe_line_leaves_the_devices_unknown() {
        let t = parse_probe(
            "TUNELOOP_PROBE {\"python\": \"3.12.1\", \"torch\": \"2.13.0+cu130\", \"cuda_version\": \"13.0\"}",
        )
        .unwrap();
        assert!(!t.devices_known && !t.cuda_available);
        assert_eq!(t.summary(), "torch 2.13.0+cu130");
    }

    /// Both probes on the interpreter the tests use (`TUNELOOP_PYTHON`, else
    /// the cached venv's): the version file gives what the import gives.
    #[tokio::test]
    async fn the_version_probe_reads_what_the_import_says_without_importing() {
        let python = std::env::var("TUNELOOP_PYTHON").unwrap_or_else(|_| {
            format!(
                "{}/.cache/tuneloop/venv/bin/python",
                std::env::var("HOME").unwrap_or_default()
            )
        });
        let (cwd, stop) = (std::env::temp_dir(), Interrupt::new());
        let full = probe_torch(&python, &cwd, &stop).await;
        let light = probe_torch_version(&python, &cwd, &stop).await;
        assert!(full.torch_version.is_some(), "{full:?}");
        assert_eq!(light.torch_version, full.torch_version);
        assert_eq!(light.cuda_version, full.cuda_version);
        assert_eq!(light.python_version, full.python_version);
        assert!(full.devices_known && !light.devices_known);
        // No torch: the same error words as the import's.
        let none = run_probe(
            &python,
            &cwd,
            &stop,
            &PROBE_VERSION_PY.replace("find_spec('torch')", "find_spec('no_such_torch_xyz')"),
        )
        .await;
        assert_eq!(none.torch_version, None);
        assert!(
            none.summary().contains("No module named 'torch'"),
            "{none:?}"
        );
    }

    #[test]
    fn a_command_that_names_its_python_by_path_runs_that_one() {
        let w = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let root = Path::new("/proj");
        let i = of_command(&w(&["/venv/bin/python3.12", "train.py"]), root).unwrap();
        assert_eq!(i.program, "/venv/bin/python3.12");
        assert_eq!(i.rule, Rule::CommandHead);
        // Relative: the project's.
        let i = of_command(&w(&[".venv/bin/python", "train.py"]), root).unwrap();
        assert_eq!(i.program, "/proj/.venv/bin/python");
        // A bare name is discovery's; another program is not a Python.
        for words in [
            &["python", "train.py"][..],
            &["/usr/bin/torchrun", "t.py"],
            &["./run.sh"],
        ] {
            assert!(of_command(&w(words), root).is_none(), "{words:?}");
        }
        assert!(names_python("/x/python3") && names_python("python3.12"));
        assert!(!names_python("python3.x") && !names_python("pythonista"));
    }
}
