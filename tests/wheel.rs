//! The wheel, end to end: maturin builds it (the pinned tools of
//! `make setup-wheel-tools`, linked through zig for manylinux_2_17 as `make
//! wheel` does, in the dev profile to keep the test short; `make test` runs
//! the same build first, beside pytest, so here it is mostly done), pip installs it
//! into a fresh venv that sees the cached venv's torch through a `.pth` file
//! (no network, no second 4.7 GB torch), and from there `doctor`, `init` and
//! `bench` run with no interpreter configured: found once through the active
//! virtualenv, once only through the folder the binary was installed into.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::*;
use serde_json::Value;

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(c: &mut Command) -> Out {
    let o = c
        .output()
        .unwrap_or_else(|e| panic!("cannot run {c:?}: {e}"));
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

fn ok(c: &mut Command) -> Out {
    let what = format!("{c:?}");
    let o = run(c);
    assert_eq!(
        o.code, 0,
        "{what}\nstdout:\n{}\nstderr:\n{}",
        o.stdout, o.stderr
    );
    o
}

fn home() -> PathBuf {
    PathBuf::from(std::env::var("HOME").expect("HOME"))
}

fn build_venv() -> PathBuf {
    std::env::var("TUNELOOP_BUILD_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|_| home().join(".cache/tuneloop/build-venv"))
}

/// `purelib` of an interpreter's environment (its site-packages).
fn site_packages(python: &Path) -> PathBuf {
    let o = ok(Command::new(python).args([
        "-c",
        "import sysconfig; print(sysconfig.get_paths()['purelib'])",
    ]));
    PathBuf::from(o.stdout.trim())
}

/// Builds the wheel into `out` and returns its path.
fn build_wheel(out: &Path) -> PathBuf {
    let tools = build_venv();
    assert!(
        tools.join("bin/maturin").is_file(),
        "no maturin in {}: run `make setup-wheel-tools` (make test does)",
        tools.display()
    );
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = format!(
        "{}:{}",
        tools.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    ok(Command::new(tools.join("bin/maturin"))
        .args([
            "build",
            "--profile",
            "dev",
            "--zig",
            "--compatibility",
            "manylinux_2_17",
            "--target",
            "x86_64-unknown-linux-gnu",
            "--out",
        ])
        .arg(out)
        .current_dir(repo)
        // Its own target folder: the outer cargo's is not to be touched, and
        // the zig-linked build stays cached between test runs (`make test`
        // keeps it beside the venv, so fresh clones share it).
        .env(
            "CARGO_TARGET_DIR",
            std::env::var_os("TUNELOOP_WHEEL_TARGET_DIR")
                .map_or_else(|| repo.join("target/wheel-test"), PathBuf::from),
        )
        .env("PATH", path));
    let wheels: Vec<PathBuf> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "whl"))
        .collect();
    assert_eq!(wheels.len(), 1, "{wheels:?}");
    wheels[0].clone()
}

/// The environment of a shell with nothing about Python configured.
fn bare(c: &mut Command) -> &mut Command {
    c.env_remove("TUNELOOP_PYTHON")
        .env_remove("VIRTUAL_ENV")
        .env_remove("CONDA_PREFIX")
        .env_remove("PYTHONPATH")
        .env("NO_COLOR", "1")
}

#[test]
fn the_wheel_installs_with_pip_and_runs_doctor_init_and_bench_with_no_interpreter_configured() {
    let _run = slot();
    let tmp = tempfile::tempdir().unwrap();
    let wheel = build_wheel(&tmp.path().join("wheels"));

    // The wheel: manylinux_2_17 for x86_64, Cargo.toml's version, the binary
    // as a script, the licence and the README (as the long description).
    let name = wheel.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with(&format!("tuneloop-{}-py3-none-", env!("CARGO_PKG_VERSION")))
            && name.contains("manylinux_2_17_x86_64"),
        "{name}"
    );
    let cached = python();
    let listing = ok(Command::new(&cached)
        .args([
            "-c",
            "import sys, zipfile\nz = zipfile.ZipFile(sys.argv[1])\nfor n in z.namelist(): print(n)\nm = [n for n in z.namelist() if n.endswith('dist-info/METADATA')][0]\nprint(z.read(m).decode())",
        ])
        .arg(&wheel))
    .stdout;
    let v = env!("CARGO_PKG_VERSION");
    for want in [
        format!("tuneloop-{v}.data/scripts/tuneloop"),
        format!("tuneloop-{v}.dist-info/licenses/LICENSE"),
        "License: MIT".to_string(),
        "License-File: LICENSE".to_string(),
        format!("Version: {v}"),
        "Summary: Makes PyTorch training faster on its own".to_string(),
        "pip install tuneloop".to_string(),
    ] {
        assert!(
            listing.contains(&want),
            "{want} not in the wheel:\n{listing}"
        );
    }

    // A fresh venv (same Python as the cached one) that sees its torch.
    let venv = tmp.path().join("venv");
    ok(Command::new(&cached).args(["-m", "venv"]).arg(&venv));
    let vpy = venv.join("bin/python");
    std::fs::write(
        site_packages(&vpy).join("torch_from_cache.pth"),
        format!("{}\n", site_packages(Path::new(&cached)).display()),
    )
    .unwrap();
    ok(bare(Command::new(&vpy).args([
        "-m",
        "pip",
        "install",
        "--no-deps",
        "--no-index",
        "--disable-pip-version-check",
        "--quiet",
    ]))
    .arg(&wheel));
    let exe = venv.join("bin/tuneloop");
    assert!(exe.is_file(), "pip did not install {}", exe.display());

    // A tiny project, and a shell where the venv is activated.
    let project = tmp.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("train.py"), IO_BOUND_TRAIN).unwrap();
    let outer_path = std::env::var("PATH").unwrap_or_default();
    let activated = |args: &[&str]| {
        let mut c = Command::new("tuneloop");
        bare(&mut c)
            .args(args)
            .current_dir(&project)
            .env("VIRTUAL_ENV", &venv)
            .env(
                "PATH",
                format!("{}:{outer_path}", venv.join("bin").display()),
            );
        run(&mut c)
    };

    let r = activated(&["doctor"]);
    assert_eq!(
        r.code, 2,
        "no workspace yet: doctor must say so\n{}",
        r.stdout
    );
    assert!(r.stdout.contains("tuneloop init"), "{}", r.stdout);

    let r = activated(&["init", "--entry", "train:build"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let toml = std::fs::read_to_string(project.join("tuneloop.toml")).unwrap();
    assert!(
        !toml.lines().any(|l| l.trim_start().starts_with("python")),
        "init wrote a python line without being asked:\n{toml}"
    );
    // Fewer steps: this test proves the set-up, not the figures.
    std::fs::write(
        project.join("tuneloop.toml"),
        toml.replace("steps = 40", "steps = 8")
            .replace("warmup_steps = 5", "warmup_steps = 1"),
    )
    .unwrap();

    let r = activated(&["doctor"]);
    assert_eq!(r.code, 0, "doctor must pass\n{}{}", r.stdout, r.stderr);
    let want_python = format!("{} (the active virtualenv ($VIRTUAL_ENV))", vpy.display());
    assert!(r.stdout.contains(&want_python), "{}", r.stdout);
    let r = activated(&["doctor", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let d: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(d["ready"], true, "{d:#}");
    assert_eq!(d["interpreter"]["rule"], "virtual_env", "{d:#}");
    assert_eq!(d["interpreter"]["program"], vpy.display().to_string());
    assert!(
        d["torch"]["torch_version"]
            .as_str()
            .is_some_and(|t| t.starts_with("2.")),
        "{d:#}"
    );

    let r = activated(&["bench", "--repeats", "1"]);
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr
            .contains(&format!("python: {want_python}, torch 2.")),
        "{}",
        r.stderr
    );
    assert!(r.stdout.contains("samples/sec: "), "{}", r.stdout);

    // Not activated, the binary called by its path: the python beside it.
    let mut c = Command::new(&exe);
    bare(&mut c)
        .args(["bench", "--repeats", "1", "--json"])
        .current_dir(&project)
        .env("PATH", &outer_path);
    let r = run(&mut c);
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "python: {} (the environment tuneloop is installed in), torch 2.",
            vpy.display()
        )),
        "{}",
        r.stderr
    );
    let b: Value = serde_json::from_str(&r.stdout).unwrap();
    assert!(b["samples_per_sec"].as_f64().unwrap() > 0.0, "{b:#}");
    assert!(
        b["runs"][0]["torch_version"]
            .as_str()
            .is_some_and(|t| t.starts_with("2.")),
        "{b:#}"
    );
}
