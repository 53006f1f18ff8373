//! Build script: does nothing unless the `libtorch` feature is on. With it, the
//! binary and the test binaries get what tch's own build script gives only to
//! tch's targets (link arguments do not pass to dependents): an rpath to the
//! libtorch that torch-sys linked against (the Python environment's
//! `torch/lib`), so the binary runs without LD_LIBRARY_PATH, and libtorch
//! linked with `--no-as-needed`, so `libtorch_cuda` is loaded and CUDA is seen
//! where it exists (with `--as-needed` the linker drops it and tch reports no
//! CUDA even on a GPU machine).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var_os("CARGO_FEATURE_LIBTORCH").is_none() {
        return;
    }
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os != "linux" {
        return;
    }
    // Set by torch-sys (`links = "tch"`, `cargo:libtorch_lib=…`).
    if let Some(lib) = std::env::var_os("DEP_TCH_LIBTORCH_LIB") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.to_string_lossy());
    }
    println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
    println!("cargo:rustc-link-arg=-ltorch");
}
