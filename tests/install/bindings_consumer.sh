#!/usr/bin/env bash
# bindings_consumer.sh PREFIX REPO FAKE_CUDA: a scratch Rust crate and a
# scratch Go module, written into a temporary folder outside the tree, built
# against the installed PREFIX as bindings/README.md tells a user to (found
# through pkg-config; path dependencies and a replace line; cargo --offline,
# GOPROXY=off), then run without LD_LIBRARY_PATH over the fake CUDA driver:
# each checks the version, builds a kernel (where NVRTC is) and launches it.
# Prints "bindings consumers OK"; exits 77 (ctest: skipped) without cargo or go.
set -euo pipefail
trap 'echo "bindings_consumer: line $LINENO: \`$BASH_COMMAND\` failed (status $?)" >&2' ERR
prefix=$(cd "$1" && pwd) repo=$(cd "$2" && pwd) fake=$3
command -v cargo >/dev/null || export PATH="$HOME/.cargo/bin:$PATH"
for tool in cargo go pkg-config; do
  command -v $tool >/dev/null || { echo "SKIP: no $tool"; exit 77; }
done
work=$(mktemp -d "${TMPDIR:-/tmp}/fleetjit-consumer.XXXXXX")
trap 'rm -rf "$work"' EXIT
case $work in "$repo"/*) echo "the scratch folder $work is inside the tree" >&2; exit 1 ;; esac
# Nothing of the build tree: the prefix, through pkg-config, only.
unset FLEETJIT_LIB_DIR FLEETJIT_INCLUDE_DIR FLEETJIT_LIBRARY LD_LIBRARY_PATH CGO_CFLAGS CGO_LDFLAGS
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
export FLEETJIT_LIBCUDA=$fake  # a device without a GPU
version=$(pkg-config --modversion fleetjit)
echo "fleetjit $version at $prefix (pkg-config: $(pkg-config --libs fleetjit))"

# The loader must find libfleetjit.so.1 in the prefix through the binary's own
# RPATH/RUNPATH, not through the build tree or the environment.
check_binary() {
  local bin=$1 paths dir found=
  paths=$(readelf -d "$bin" | sed -n 's/.*(R\(UN\)\?PATH).*\[\(.*\)\]/\2/p')
  for dir in ${paths//:/ }; do
    [ "$(realpath -m "$dir")" = "$prefix/lib" ] && found=1
  done
  [ -n "$found" ] || { echo "$bin: no rpath into $prefix/lib (rpath: '$paths')" >&2; return 1; }
  local resolved
  resolved=$(env -u LD_LIBRARY_PATH ldd "$bin" | sed -n 's/.*libfleetjit.so.1 => \([^ ]*\).*/\1/p')
  [ "$(realpath "$resolved")" = "$(realpath "$prefix/lib/libfleetjit.so.1")" ] ||
    { echo "$bin loads libfleetjit.so.1 from '$resolved', not the prefix" >&2; return 1; }
}

KERNEL='extern "C" __global__ void scale(float* y, const float* x, float a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = a * x[i]; }'

# ------------------------------------------------------------------- Rust
mkdir -p "$work/rust/src"
cat >"$work/rust/Cargo.toml" <<EOF
[package]
name = "fleetjit-consumer"
version = "0.1.0"
edition = "2021"

[dependencies]
fleetjit = { path = "$repo/bindings/rust/fleetjit" }
# For DEP_FLEETJIT_LIB_DIR in build.rs (the folder fleetjit-sys linked).
fleetjit-sys = { path = "$repo/bindings/rust/fleetjit-sys" }

[workspace]
EOF
cat >"$work/rust/build.rs" <<'EOF'
// Load libfleetjit from where fleetjit-sys found it (pkg-config here).
fn main() {
    if let Ok(dir) = std::env::var("DEP_FLEETJIT_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
EOF
cat >"$work/rust/src/main.rs" <<EOF
use fleetjit::{BuildOptions, Code, LaunchConfig, Runtime, RuntimeOptions};

fn main() -> Result<(), fleetjit::Error> {
    let v = fleetjit::check_version()?;
    let rt = Runtime::new(&RuntimeOptions::new())?;
    assert!(rt.device_count()? > 0, "no device: {:?}", rt.driver_error());
    match rt.build(&BuildOptions::new(r#"$KERNEL"#).name("scale.cu")) {
        Ok(module) => {
            let k = module.kernel("scale", 0)?;
            let x = rt.alloc::<f32>(0, 256)?;
            let y = rt.alloc::<f32>(0, 256)?;
            let args = [(&y).into(), (&x).into(), 2.0f32.into(), 256i32.into()];
            unsafe { k.launch(&LaunchConfig::for_elements(256, 128), &args)? };
            println!("rust: built and launched scale ({})", module.info()?.target);
        }
        Err(e) if e.code() == Code::Unavailable => println!("rust: no NVRTC, launch skipped: {e}"),
        Err(e) => return Err(e),
    }
    println!("rust consumer OK: crate {}, library {v}", fleetjit::CRATE_VERSION);
    Ok(())
}
EOF
export CARGO_TARGET_DIR=$work/rust/target
(cd "$work/rust" && cargo build --offline -q)
bin=$CARGO_TARGET_DIR/debug/fleetjit-consumer
check_binary "$bin"
out=$(cd / && env -u LD_LIBRARY_PATH "$bin")
echo "$out"
grep -q "rust consumer OK: crate $version, library ${version%.*}" <<<"$out"
(cd "$work/rust" && env -u LD_LIBRARY_PATH cargo run --offline -q | grep -q "rust consumer OK")

# --------------------------------------------------------------------- Go
mkdir -p "$work/go"
cat >"$work/go/go.mod" <<EOF
module example.com/consumer

go 1.19

require fleetjit.dev/fleetjit v$version

replace fleetjit.dev/fleetjit => $repo/bindings/go
EOF
cat >"$work/go/main.go" <<EOF
package main

import (
	"fmt"
	"log"

	"fleetjit.dev/fleetjit"
)

func main() {
	if err := fleetjit.CheckVersion(); err != nil {
		log.Fatal(err)
	}
	rt, err := fleetjit.NewRuntime(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close()
	if n, _ := rt.DeviceCount(); n == 0 {
		log.Fatalf("no device: %s", rt.DriverError())
	}
	m, err := rt.Build(&fleetjit.BuildOptions{Source: \`$KERNEL\`, Name: "scale.cu"})
	switch {
	case fleetjit.CodeOf(err) == fleetjit.Unavailable:
		fmt.Println("go: no NVRTC, launch skipped:", err)
	case err != nil:
		log.Fatal(err)
	default:
		defer m.Close()
		k, err := m.Kernel("scale", 0)
		if err != nil {
			log.Fatal(err)
		}
		x, _ := rt.Alloc(0, 1024)
		y, _ := rt.Alloc(0, 1024)
		if err := k.Launch(fleetjit.Linear(256, 128), fleetjit.Mem(y), fleetjit.Mem(x), fleetjit.F32(2), fleetjit.I32(256)); err != nil {
			log.Fatal(err)
		}
		fmt.Println("go: built and launched scale")
	}
	major, minor := fleetjit.Version()
	fmt.Printf("go consumer OK: module %s, library %d.%d\n", fleetjit.ModuleVersion, major, minor)
}
EOF
# A build cache of its own: go's does not key a cgo package on what
# pkg-config printed (golang/go#24544), so a cache shared with a build
# against another fleetjit.pc would link that one's flags (and rpath).
(cd "$work/go" && CGO_ENABLED=1 GOFLAGS=-mod=mod GOPROXY=off GOCACHE="$work/go-cache" \
  go build -o consumer .)
check_binary "$work/go/consumer"
out=$(cd / && env -u LD_LIBRARY_PATH "$work/go/consumer")
echo "$out"
grep -q "go consumer OK: module $version, library ${version%.*}" <<<"$out"
echo "bindings consumers OK"
