#!/bin/sh
# The CMake package moves with its prefix, as TAP: `make install` staged
# with DESTDIR, the staged prefix moved elsewhere, then a C and C++ project
# and a LANGUAGES CXX CUDA project (when configure accepted an nvcc) built
# against the moved copy with find_package(cucapture CONFIG) alone, and run.
echo "1..3"
top=${top_builddir:-.}
get() { sed -n "s/^$1 = //p" "$top/Makefile"; }
prefix=$(get prefix); version=$(get PACKAGE_VERSION); nvcc=$(get NVCC); san=$(get SAN_CFLAGS)
cuda_include=$(get CUDA_INCLUDEDIR)
# lines naming a path under the prefix, but for comments and the CUDA
# headers' places (outside the package: named as they are)
package_paths() { grep -n "$prefix/" "$1" | grep -v '^[0-9]*:#' | grep -vF -e "$cuda_include" -e 'cuda.h'; }
skip_all() { for i in 1 2 3; do echo "ok $i # SKIP $1"; done; exit 0; }
command -v cmake >/dev/null 2>&1 || skip_all "cmake not found"
[ -z "$san" ] || skip_all "a sanitizer build: programs built by CMake without the sanitizers cannot load its library"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
moved="$tmp/moved/opt/elsewhere"
if env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$top" install DESTDIR="$tmp/stage" > "$tmp/install.log" 2>&1 &&
   mkdir -p "$tmp/moved/opt" && mv "$tmp/stage$prefix" "$moved" && rm -rf "$tmp/stage"; then
    config=$(find "$moved" -name cucapture-config.cmake | head -n 1)
    if [ -z "$config" ]; then
        echo "not ok 1 - the moved installation has no cucapture-config.cmake"
    elif package_paths "$config" | grep -q .; then
        echo "not ok 1 - $config names the original prefix $prefix: $(package_paths "$config" | head -n 1)"
    else
        echo "ok 1 - make install DESTDIR, prefix $prefix moved to $moved; the package names no path of $prefix"
    fi
else
    echo "not ok 1 - make install DESTDIR failed: $(tail -n 5 "$tmp/install.log")"
    echo "not ok 2 - not built: no installation"; echo "not ok 3 - not built: no installation"; exit 0
fi

# C and C++ against the moved copy: the headers' version is the library's
mkdir -p "$tmp/app"
cat > "$tmp/app/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.17)
project(relocated LANGUAGES C CXX)
find_package(cucapture 1.5 CONFIG REQUIRED)
add_executable(app-c app.c)
target_link_libraries(app-c PRIVATE cucapture::cucapture)
add_executable(app-cxx app.cpp)
target_compile_features(app-cxx PRIVATE cxx_std_17)
target_link_libraries(app-cxx PRIVATE cucapture::cucapture)
CMAKE
cat > "$tmp/app/app.c" <<'PROGRAM'
#include <stdio.h>
#include <cucapture.h>
int main(void)
{
    printf("%d.%d.%d %s\n", CUCAP_VERSION_MAJOR, CUCAP_VERSION_MINOR, CUCAP_VERSION_PATCH, cucap_version_string());
    return 0;
}
PROGRAM
cat > "$tmp/app/app.cpp" <<'PROGRAM'
#include <cstdio>
#include <cucapture.hpp>
int main()
{
    std::printf("%d.%d.%d %s\n", CUCAP_VERSION_MAJOR, CUCAP_VERSION_MINOR, CUCAP_VERSION_PATCH, cucap::version_string());
    return 0;
}
PROGRAM
want="$version $version"
if cmake -S "$tmp/app" -B "$tmp/app/build" -DCMAKE_PREFIX_PATH="$moved" > "$tmp/app.log" 2>&1 &&
   cmake --build "$tmp/app/build" >> "$tmp/app.log" 2>&1; then
    c=$("$tmp/app/build/app-c" 2>&1); cxx=$("$tmp/app/build/app-cxx" 2>&1)
    if [ "$c" = "$want" ] && [ "$cxx" = "$want" ]; then
        echo "ok 2 - a C and C++ project built against the moved copy runs it: $c"
    else
        echo "not ok 2 - the programs print '$c' and '$cxx', not '$want'"
    fi
else
    echo "not ok 2 - the C and C++ project did not build: $(tail -n 8 "$tmp/app.log" | tr '\n' ' ')"
fi

# CUDA C++ (<<<>>> on a builder's stream) against the moved copy
if [ -z "$nvcc" ]; then
    echo "ok 3 - a LANGUAGES CXX CUDA project # SKIP configure accepted no nvcc (see its summary)"
    exit 0
fi
mkdir -p "$tmp/cuda"
cat > "$tmp/cuda/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.18)
project(relocated_cuda LANGUAGES CXX CUDA)
find_package(cucapture 1.5 CONFIG REQUIRED)
add_executable(fill fill.cu)
set_target_properties(fill PROPERTIES CUDA_ARCHITECTURES 90 CUDA_STANDARD 17 CXX_STANDARD 17)
target_link_libraries(fill PRIVATE cucapture::cucapture)
CMAKE
cat > "$tmp/cuda/fill.cu" <<'PROGRAM'
#include <cstdio>
#include <cuda_runtime.h>
#include <cucapture.hpp>

__global__ void fill(int *x, int v) { x[threadIdx.x] = v; }

int main()
{
    int *d = nullptr, host[32] = {0};
    try {
        cucap::init();
        if (cudaMalloc(&d, sizeof host) != cudaSuccess) {
            std::printf("no usable GPU\n");
            return 77;
        }
        cucap::builder b = cucap::builder::create(0);
        b.capture([&](cucap::builder &self) { fill<<<1, 32, 0, self.stream()>>>(d, 7); });
        cucap::exec e = b.complete();
        e.launch(b.stream());
        cudaStreamSynchronize(b.stream());
        cudaMemcpy(host, d, sizeof host, cudaMemcpyDeviceToHost);
        cudaFree(d);
    } catch (const cucap::error &e) {
        std::printf("%s\n", e.what());
        return 77;
    }
    std::printf("%d\n", host[31]);
    return host[31] == 7 ? 0 : 1;
}
PROGRAM
if cmake -S "$tmp/cuda" -B "$tmp/cuda/build" -DCMAKE_PREFIX_PATH="$moved" -DCMAKE_CUDA_COMPILER="$nvcc" \
     > "$tmp/cuda.log" 2>&1 && cmake --build "$tmp/cuda/build" >> "$tmp/cuda.log" 2>&1; then
    out=$(env -u CUCAPTURE_DRIVER "$tmp/cuda/build/fill" 2>&1); rc=$?
    if [ $rc -eq 0 ]; then echo "ok 3 - a LANGUAGES CXX CUDA project built against the moved copy, run on the GPU: $out"
    elif [ $rc -eq 77 ] && [ "${CUCAPTURE_REQUIRE_GPU:-}" != 1 ]; then
        echo "ok 3 - a LANGUAGES CXX CUDA project built against the moved copy with $nvcc; not run: $out"
    else echo "not ok 3 - the CUDA project's program: exit $rc: $out"; fi
else
    echo "not ok 3 - the CUDA project did not build: $(tail -n 8 "$tmp/cuda.log" | tr '\n' ' ')"
fi
