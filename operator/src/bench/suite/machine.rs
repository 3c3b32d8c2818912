//! What the reports say about the machine and the run: outputs of a few commands.

use std::process::Command;

/// A shell command's output, trimmed at the end ("" when it fails).
pub fn sh(command: &str) -> String {
    Command::new("sh")
        .args(["-c", command])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim_end().to_string())
        .unwrap_or_default()
}

pub fn nproc() -> String {
    sh("nproc")
}

pub fn cpu_model() -> String {
    sh("lscpu | sed -n 's/^Model name: *//p'")
}

pub fn kernel() -> String {
    sh("uname -r")
}

pub fn loadavg() -> String {
    sh("cut -d' ' -f1-3 /proc/loadavg")
}

pub fn redis_version() -> String {
    sh("redis-server --version | sed 's/ sha=.*//'")
}

pub fn libfabric_version() -> String {
    let v = sh("dpkg-query -W -f '${Version}' libfabric1 2>/dev/null");
    if v.is_empty() {
        "unknown".into()
    } else {
        v
    }
}

/// The git revision of the current directory's checkout.
pub fn git_rev() -> String {
    let v = sh("git rev-parse --short HEAD 2>/dev/null");
    if v.is_empty() {
        "unknown".into()
    } else {
        v
    }
}

pub fn utc_now() -> String {
    sh("date -u '+%Y-%m-%d %H:%M:%S'")
}
